// C library handles owned by a unique_ptr whose deleter calls the library's unref function, so a
// handle is released on every path (libkmod, libudev).
#pragma once

#include <memory>

namespace hostprep {

template <auto Unref>
struct UnrefDeleter {
  template <class T>
  void operator()(T* p) const {
    Unref(p);
  }
};

// CHandle<kmod_ctx, kmod_unref>: a kmod_ctx* released with kmod_unref.
template <class T, auto Unref>
using CHandle = std::unique_ptr<T, UnrefDeleter<Unref>>;

}  // namespace hostprep
