// Building the demo model on first use, and finding the shipped assets.
#include "app/common/demo_model.h"

#include <cstdlib>

#include "core/gguf/gguf_file.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/train_vocabulary.h"
#include "storage/data_dir.h"

namespace kvc::app {

std::filesystem::path asset_dir() {
  if (const char* env = std::getenv("KVCHAT_ASSET_DIR"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share/kvchat/assets";
    if (std::filesystem::exists(installed / "demo/corpus.txt")) return installed;
  }
  return KVC_ASSET_DIR;
}

std::filesystem::path demo_model_path(const std::string& data_dir) {
  return storage::resolve_data_dir(data_dir) / "models" / "kvchat-demo.gguf";
}

Result<std::string> ensure_demo_model(const std::string& data_dir, const std::function<void(double)>& progress) {
  const auto path = demo_model_path(data_dir);
  if (std::filesystem::exists(path) && gguf::GgufFile::open(path.string()).ok()) return path.string();
  KVC_TRY(storage::ensure_dir(path.parent_path()));
  auto vocab = tokenizer::train_vocabulary((asset_dir() / "demo/corpus.txt").string(), 1024);
  if (!vocab.ok()) return vocab.error();
  model::ModelSpec spec;
  spec.name = "kvchat demo (random weights)";
  spec.n_embd = 512;
  spec.n_layer = 8;
  spec.n_head = 8;
  spec.n_head_kv = 2;
  spec.n_ff = 1408;
  spec.n_ctx = 4096;
  spec.type = model::FileType::q8_0;
  spec.chat_template = model::demo_chat_template();
  // Written to a temporary name first, so an interrupted build never leaves a half file that
  // a later start would have to reject.
  const auto partial = path.string() + ".partial";
  KVC_TRY(model::write_random_model(spec, *vocab, partial, [&](size_t done, size_t total) {
    if (progress) progress(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0);
  }));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) return make_error(ErrorCode::io, "cannot rename " + partial + " to " + path.string() + ": " + ec.message());
  return path.string();
}

}  // namespace kvc::app
