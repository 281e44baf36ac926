// libFuzzer target for the whole load path of untrusted files: GGUF -> ModelConfig and the
// model checks -> tensors -> tokenizer (its validation and the ModelProto writer) -> a forward
// step of two tokens and a short decode, on the CPU backend.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<kvc::backend::Backend> be = kvc::backend::make_cpu_backend(1);
  auto f = kvc::gguf::GgufFile::from_memory(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) return 0;  // the GGUF reader's own target covers this part
  auto m = kvc::model::Model::from_file(std::move(*f), "fuzz input", *be);
  if (!m.ok()) {
    if (m.error().message.empty()) std::abort();  // every refusal says why
    return 0;
  }
  const kvc::model::Model& model = **m;
  // A usable model must tokenize, evaluate and decode without a fault.
  const auto& tok = model.tokenizer();
  const auto ids = tok.encode("Once upon a time <s> 你好", tok.wants_bos(), true);
  (void)tok.decode(ids);
  auto s = kvc::model::Session::create(model, 32, 8);
  if (!s.ok()) return 0;  // e.g. no KV layout for this head size: a clear error, not a fault
  std::vector<int32_t> two = {0, static_cast<int32_t>(1 % model.config().n_vocab)};
  auto logits = s->evaluate(two);
  if (!logits.ok()) return 0;
  kvc::model::GenerateOptions opt;
  opt.max_tokens = 3;
  opt.sampling.temperature = 0;
  (void)kvc::model::generate(*s, two, opt);
  return 0;
}
