// The built-in demo model and the shipped assets folder, shared by kvchat and kvchat-cli.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "core/util/result.h"

namespace kvc::app {

// The folder of shipped assets: $KVCHAT_ASSET_DIR, an installed share/kvchat/assets next to
// the executable's prefix, or the source tree's assets/.
std::filesystem::path asset_dir();

// Path of the demo model under the data directory (it may not exist yet).
std::filesystem::path demo_model_path(const std::string& data_dir);

// The demo model (random weights, vocabulary trained on assets/demo/corpus.txt), built under
// the data directory on first use. `progress` gets fractions in [0, 1] while it is written.
Result<std::string> ensure_demo_model(const std::string& data_dir, const std::function<void(double)>& progress = {});

}  // namespace kvc::app
