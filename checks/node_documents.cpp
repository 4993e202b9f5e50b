// check-node's node input read with simdjson's On-Demand API (simdjson/simdjson,
// doc/basics.md): validated as a whole, then only the members the checks use are turned into
// nlohmann::json, one Node at a time.
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "checks/documents.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/resource_names.hpp"

namespace hostprep {

namespace od = simdjson::ondemand;
using nlohmann::json;

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING);

struct NodeItems::State {
  std::string text;  // capacity() >= size() + kJsonPadding
  od::parser parser;
  od::document doc;
  size_t itemsField = 0;  // the index, among the root's members, of the "items" read
};

namespace {

constexpr size_t kBad = std::numeric_limits<size_t>::max();

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at p (within end), or -1.
long hex4(const char* p, const char* end) {
  if (end - p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; ++i) {
    int d = hexDigit(p[i]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void appendUtf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Whether any of the 8 bytes at p is a quote, a backslash or below U+0020: what scanString stops
// at. The bit tricks are "determine if a word has a byte less than n" (exact for n <= 128) and
// "has a zero byte" of Sean Eron Anderson's Bit Twiddling Hacks
// (graphics.stanford.edu/~seander/bithacks.html).
bool special8(const char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  const auto hasZero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  const uint64_t below = (w - kOnes * 0x20) & ~w & kHigh;
  return (below | hasZero(w ^ (kOnes * '"')) | hasZero(w ^ (kOnes * '\\'))) != 0;
}

// The string whose text starts at p (just past its opening quote), checked by the rules
// nlohmann::json's lexer applies (RFC 8259 section 7): no control character below U+0020, only
// the escapes \" \\ \/ \b \f \n \r \t \uXXXX, a \u surrogate only as a high-low pair. simdjson
// validated the UTF-8 of the whole text already. Returns the length up to the closing quote, or
// kBad; with out, also decodes the string into it.
size_t scanString(const char* p, const char* end, std::string* out) {
  const char* s = p;
  const char* plain = p;  // the start of the run not yet copied to out
  while (s < end) {
    while (end - s >= 8 && !special8(s)) s += 8;  // the plain run, a word at a time
    if (s >= end) break;
    const auto c = static_cast<unsigned char>(*s);
    if (c == '"') {
      if (out) out->append(plain, static_cast<size_t>(s - plain));
      return static_cast<size_t>(s - p);
    }
    if (c < 0x20) return kBad;
    if (c != '\\') {
      ++s;
      continue;
    }
    if (out) out->append(plain, static_cast<size_t>(s - plain));
    if (++s >= end) return kBad;
    char e = *s++;
    char plainEscape = 0;
    switch (e) {
      case '"':
        plainEscape = '"';
        break;
      case '\\':
        plainEscape = '\\';
        break;
      case '/':
        plainEscape = '/';
        break;
      case 'b':
        plainEscape = '\b';
        break;
      case 'f':
        plainEscape = '\f';
        break;
      case 'n':
        plainEscape = '\n';
        break;
      case 'r':
        plainEscape = '\r';
        break;
      case 't':
        plainEscape = '\t';
        break;
      case 'u':
        break;
      default:
        return kBad;
    }
    if (e != 'u') {
      if (out) *out += plainEscape;
      plain = s;
      continue;
    }
    long cp = hex4(s, end);
    if (cp < 0 || (cp >= 0xdc00 && cp <= 0xdfff)) return kBad;
    s += 4;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (end - s < 2 || s[0] != '\\' || s[1] != 'u') return kBad;
      long low = hex4(s + 2, end);
      if (low < 0xdc00 || low > 0xdfff) return kBad;
      s += 6;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (out) appendUtf8(*out, static_cast<unsigned long>(cp));
    plain = s;
  }
  return kBad;
}

// Reads a JSON text that starts with '{'. Pass 1 (read) validates every value and finds the items;
// pass 2 (project*) turns the members check-node reads into json. Any simdjson error, or a value
// this reader does not take (a number nlohmann would read differently), is `false`: the caller
// falls back to nlohmann, which then reports the error in its words (or reads the text).
class Reader {
 public:
  explicit Reader(const std::string& text)
      : end_(text.data() + text.size()), escapes_(text.find('\\') != std::string::npos) {}

  // Whether the string whose text starts at raw is one nlohmann reads. simdjson's stage 1 already
  // rejected a text with invalid UTF-8 or a byte below U+0020 inside a string (UTF8_ERROR,
  // UNESCAPED_CHARS: simdjson/simdjson, include/simdjson/error.h), so in a text without a single
  // backslash every string is valid and none needs scanning.
  bool valid(const char* raw) const { return !escapes_ || scanString(raw, end_, nullptr) != kBad; }

  // A key (field.key().raw()) decoded into key_.
  bool key(const od::field& f) {
    key_.clear();
    return scanString(f.key().raw(), end_, &key_) != kBad;
  }
  const std::string& lastKey() const { return key_; }

  bool string(od::value& v, std::string* out) {
    od::raw_json_string r;
    if (v.get_raw_json_string().get(r)) return false;
    return out ? scanString(r.raw(), end_, out) != kBad : valid(r.raw());
  }

  // A number as nlohmann reads it: an integer literal without '-' is unsigned, one with '-'
  // signed, anything else a finite double. An integer too large for 64 bits (nlohmann: a double)
  // is left to nlohmann.
  bool number(od::value& v, json* out) {
    const std::string_view tok = v.raw_json_token();
    const bool integer = tok.find_first_of(".eE") == std::string_view::npos;
    if (integer && !tok.empty() && tok[0] == '-') {
      int64_t i = 0;
      if (v.get_int64().get(i)) return false;
      if (out) *out = i;
    } else if (integer) {
      uint64_t u = 0;
      if (v.get_uint64().get(u)) return false;
      if (out) *out = u;
    } else {
      double d = 0;
      if (v.get_double().get(d) || !std::isfinite(d)) return false;
      if (out) *out = d;
    }
    return true;
  }

  // Validates v and everything in it; with out, also converts it.
  bool value(od::value v, json* out) {
    od::json_type t;
    if (v.type().get(t)) return false;
    switch (t) {
      case od::json_type::object: {
        Nesting in(nesting_);
        if (!in) return false;
        od::object o;
        if (v.get_object().get(o)) return false;
        if (out) *out = json::object();
        for (auto fr : o) {
          od::field f;
          if (std::move(fr).get(f)) return false;
          if (!out) {  // the key validated, not decoded: nothing reads it
            if (!valid(f.key().raw()) || !value(f.value(), nullptr)) return false;
            continue;
          }
          if (!key(f)) return false;
          json member;
          std::string k = key_;
          if (!value(f.value(), &member)) return false;
          (*out)[k] = std::move(member);  // a repeated key: the last one, as nlohmann
        }
        return true;
      }
      case od::json_type::array: {
        Nesting in(nesting_);
        if (!in) return false;
        od::array a;
        if (v.get_array().get(a)) return false;
        if (out) *out = json::array();
        for (auto er : a) {
          od::value e;
          if (std::move(er).get(e)) return false;
          json item;
          if (!value(e, out ? &item : nullptr)) return false;
          if (out) out->push_back(std::move(item));
        }
        return true;
      }
      case od::json_type::string: {
        if (!out) return string(v, nullptr);
        std::string s;
        if (!string(v, &s)) return false;
        *out = std::move(s);
        return true;
      }
      case od::json_type::number:
        return number(v, out);
      case od::json_type::boolean: {
        bool b = false;
        if (v.get_bool().get(b)) return false;
        if (out) *out = b;
        return true;
      }
      case od::json_type::null: {
        bool n = false;
        if (v.is_null().get(n) || !n) return false;
        if (out) *out = nullptr;
        return true;
      }
    }
    return false;
  }

  // A scalar converted; an object or array validated and read as null (what the checks make of a
  // label or a flag that is not a scalar: absent).
  bool scalar(od::value v, json& out) {
    od::json_type t;
    if (v.type().get(t)) return false;
    if (t == od::json_type::object || t == od::json_type::array) {
      out = nullptr;
      return value(v, nullptr);
    }
    return value(v, &out);
  }

  // An item of the List, validated; its shape (object, kind, metadata.name) into bad when it is
  // not a named Node and bad is still empty.
  bool item(od::value v, size_t index, std::optional<NodeItems::Bad>& bad) {
    od::json_type t;
    if (v.type().get(t)) return false;
    if (t != od::json_type::object) {
      if (!bad) bad = NodeItems::Bad{index, false, ""};
      return value(v, nullptr);
    }
    od::object o;
    if (v.get_object().get(o)) return false;
    std::string kind;
    bool named = false;
    for (auto fr : o) {
      od::field f;
      if (std::move(fr).get(f) || !key(f)) return false;
      if (key_ == "kind") {
        json k;
        if (!value(f.value(), &k)) return false;
        kind = k.is_string() ? k.get<std::string>() : std::string();
      } else if (key_ == "metadata") {
        if (!metadataName(f.value(), named)) return false;
      } else if (!value(f.value(), nullptr)) {
        return false;
      }
    }
    if (!bad && ((!kind.empty() && kind != "Node") || !named)) {
      bad = NodeItems::Bad{index, true, kind};
    }
    return true;
  }

  // A Node's members check-node reads (documents.hpp), from a validated object.
  bool node(od::object o, json& out) {
    out = json::object();
    for (auto fr : o) {
      od::field f;
      if (std::move(fr).get(f) || !key(f)) return false;
      if (key_ == "kind") {
        json k;
        if (!scalar(f.value(), k)) return false;
        if (k.is_string()) {
          out["kind"] = std::move(k);
        } else {
          out.erase("kind");
        }
      } else if (key_ == "metadata") {
        out.erase("metadata");
        if (!members(f.value(), out, "metadata", {{"name", false}, {"labels", true}})) return false;
      } else if (key_ == "spec") {
        out.erase("spec");
        if (!members(f.value(), out, "spec", {{"unschedulable", false}})) return false;
      } else if (key_ == "status") {
        out.erase("status");
        od::value s = f.value();
        od::object so;
        if (s.get_object().get(so)) continue;  // not an object: the checks read no member
        json& status = out["status"] = json::object();
        for (auto sr : so) {
          od::field sf;
          if (std::move(sr).get(sf) || !key(sf)) return false;
          if (key_ != "capacity" && key_ != "allocatable") continue;
          std::string which = key_;
          status.erase(which);
          od::object ro;
          if (sf.value().get_object().get(ro)) continue;
          json& res = status[which] = json::object();
          for (auto rr : ro) {
            od::field rf;
            if (std::move(rr).get(rf) || !key(rf)) return false;
            if (!startsWith(key_, kResourcePrefix)) continue;
            std::string name = key_;
            json v;
            if (!value(rf.value(), &v)) return false;
            res[name] = std::move(v);
          }
        }
      }
    }
    return true;
  }

 private:
  // out[name] = the object v with only the named members; each scalar, or (second: true) an
  // object of scalars (labels). v not an object: no out[name].
  bool members(od::value v, json& out, const char* name,
               std::initializer_list<std::pair<const char*, bool>> wanted) {
    od::object o;
    if (v.get_object().get(o)) return true;
    json& m = out[name] = json::object();
    for (auto fr : o) {
      od::field f;
      if (std::move(fr).get(f) || !key(f)) return false;
      const std::pair<const char*, bool>* w = nullptr;
      for (const auto& x : wanted) {
        if (key_ == x.first) w = &x;
      }
      if (!w) continue;
      std::string k = key_;
      if (!w->second) {
        json s;
        if (!scalar(f.value(), s)) return false;
        m[k] = std::move(s);
        continue;
      }
      od::object lo;
      if (f.value().get_object().get(lo)) {
        m[k] = nullptr;
        continue;
      }
      json& labels = m[k] = json::object();
      for (auto lr : lo) {
        od::field lf;
        if (std::move(lr).get(lf) || !key(lf)) return false;
        std::string lk = key_;
        json s;
        if (!scalar(lf.value(), s)) return false;
        labels[lk] = std::move(s);
      }
    }
    return true;
  }

  // metadata: validated; named: whether its (last) name is a non-empty string.
  bool metadataName(od::value v, bool& named) {
    named = false;
    od::json_type t;
    if (v.type().get(t)) return false;
    if (t != od::json_type::object) return value(v, nullptr);
    od::object o;
    if (v.get_object().get(o)) return false;
    for (auto fr : o) {
      od::field f;
      if (std::move(fr).get(f) || !key(f)) return false;
      if (key_ != "name") {
        if (!value(f.value(), nullptr)) return false;
        continue;
      }
      json n;
      if (!value(f.value(), &n)) return false;
      named = n.is_string() && !n.get_ref<const std::string&>().empty();
    }
    return true;
  }

  // Values nested deeper than kMaxNesting go to nlohmann-json (`false`), which reads them or
  // reports them as too deep (past kMaxDocumentNesting levels from the top, where this count
  // starts below the root, "items" and an item: half of it leaves room for those). simdjson's
  // On-Demand keeps a position per level, up to its parser's max_depth (1024 by default), and in
  // 3.0.1 checks that bound only with development checks on: 100,000 nested arrays wrote past it
  // and crashed check-node. And value() recurses once per level.
  static constexpr size_t kMaxNesting = kMaxDocumentNesting / 2;
  class Nesting {
   public:
    explicit Nesting(size_t& depth) : depth_(depth), ok_(++depth_ <= kMaxNesting) {}
    ~Nesting() { --depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    explicit operator bool() const { return ok_; }

   private:
    size_t& depth_;
    bool ok_;
  };

  const char* end_;
  bool escapes_;  // the text holds a backslash
  std::string key_;
  size_t nesting_ = 0;
};

// Pass 1 over a text starting with '{': validated, its items' shapes checked. The result: the
// Document (a List: its kind and st.items set; any other object: the Node's members), or nullopt
// to let nlohmann read the text.
std::optional<Document> readNodeText(std::unique_ptr<NodeItems::State>& st, std::string_view name) {
  Reader r(st->text);
  if (st->parser
          .iterate(
              simdjson::padded_string_view(st->text.data(), st->text.size(), st->text.capacity()))
          .get(st->doc))
    return std::nullopt;
  od::object root;
  if (st->doc.get_object().get(root)) return std::nullopt;
  json kind;
  bool list = false;
  size_t count = 0, index = 0;
  std::optional<NodeItems::Bad> bad;
  for (auto fr : root) {
    od::field f;
    if (std::move(fr).get(f) || !r.key(f)) return std::nullopt;
    if (r.lastKey() == "items") {
      od::value v = f.value();
      od::json_type t;
      if (v.type().get(t)) return std::nullopt;
      list = t == od::json_type::array;
      count = 0;
      bad.reset();
      if (!list) {
        if (!r.value(v, nullptr)) return std::nullopt;
      } else {
        od::array a;
        if (v.get_array().get(a)) return std::nullopt;
        for (auto er : a) {
          od::value e;
          if (std::move(er).get(e) || !r.item(e, count, bad)) return std::nullopt;
          ++count;
        }
        st->itemsField = index;
      }
    } else if (r.lastKey() == "kind") {
      if (!r.value(f.value(), &kind)) return std::nullopt;
    } else if (!r.value(f.value(), nullptr)) {
      return std::nullopt;
    }
    ++index;
  }
  // Nothing but blanks may follow the object (nlohmann: "unexpected ... expected end of input").
  const char* rest = nullptr;
  if (st->doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) return std::nullopt;

  Document d{std::string(name), json::object(), nullptr};
  if (list) {
    if (kind.is_string()) d.body["kind"] = kind;
    d.items = std::make_shared<const NodeItems>(std::move(st), count, std::move(bad));
    return d;
  }
  // One Node: read again, keeping its members.
  st->doc.rewind();
  if (st->doc.get_object().get(root) || !r.node(root, d.body)) return std::nullopt;
  return d;
}

}  // namespace

NodeItems::NodeItems(std::unique_ptr<State> s, size_t count, std::optional<Bad> bad)
    : state_(std::move(s)), count_(count), bad_(std::move(bad)) {}
NodeItems::~NodeItems() = default;

Status NodeItems::forEach(const std::function<void(size_t, const json&)>& fn) const {
  // The text was validated when it was parsed: an error here is simdjson's or ours.
  const auto broken = [] {
    return Error{"the node list could not be read a second time", 0,
                 "report this as a bug in hostprep", Exit::kFailed};
  };
  State& st = *state_;
  Reader r(st.text);
  st.doc.rewind();
  od::object root;
  if (st.doc.get_object().get(root)) return broken();
  size_t index = 0;
  for (auto fr : root) {
    od::field f;
    if (std::move(fr).get(f)) return broken();
    if (index++ != st.itemsField) continue;
    od::array a;
    if (f.value().get_array().get(a)) return broken();
    size_t i = 0;
    json node;
    for (auto er : a) {
      od::object o;
      if (er.get_object().get(o) || !r.node(o, node)) return broken();
      fn(i++, node);
    }
    return {};
  }
  return broken();
}

Result<std::vector<Document>> parseNodeDocuments(std::string text, std::string_view name) {
  const auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || text[start] != '{') return parseDocuments(text, name);
  auto st = std::make_unique<NodeItems::State>();
  st->text = std::move(text);
  if (st->text.capacity() - st->text.size() < kJsonPadding)
    st->text.reserve(st->text.size() + kJsonPadding);
  if (auto d = readNodeText(st, name)) return std::vector<Document>{std::move(*d)};
  return parseDocuments(st->text, name);
}

}  // namespace hostprep
