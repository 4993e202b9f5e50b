// The vgpu-device-manager config as check-node reads it (NVIDIA/vgpu-device-manager): the file
// itself, or the ConfigMap the GPU Operator ships it in (kind: ConfigMap, the config under
// data."config.yaml"). The config is parsed by drivers/model/vgpu_config, the same parser
// `prepare --mode vm-vgpu` uses, so the cluster side accepts and refuses exactly what the node
// side does.
#pragma once

#include <string_view>

#include "drivers/common/error.hpp"
#include "drivers/model/vgpu_config.hpp"

namespace hostprep {

// `text` is one document (YAML or JSON) named `name` in messages. A ConfigMap's embedded config
// is named "<name> (ConfigMap data)". Errors are usage errors naming the file, line and key.
Result<VgpuConfigFile> readVgpuConfigs(std::string_view text, std::string_view name);

}  // namespace hostprep
