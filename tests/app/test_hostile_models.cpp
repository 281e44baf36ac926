// Hostile model files (mkmodel --break): every command and the library refuse them naming the key or tensor at fault,
// never crash.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/model.h"
#include "support/test_support.h"
#include "ui/model_discovery.h"

using kvc::test::cli;
using kvc::test::quoted;

namespace {

enum class Expect { refused, works };
constexpr Expect refused = Expect::refused, works = Expect::works;

// What kvchat must do with one variant.
//   model:  Model::load, ui::read_model_info and every command that loads the model (inspect,
//           generate, chat, logits, bench, perplexity, quantize)
//   vocab:  tokenize, which reads only the vocabulary (a vocabulary-only GGUF is a valid input)
//   names:  what every refusal says: the metadata key or tensor at fault
//   parses: the GGUF itself parses, so inspect prints its metadata before saying it cannot run
// Each comment says which check the row exercises: without that check the row fails. Seen so:
// with every check of ModelConfig, check_tensors, the template cap, the tokenizer's lengths and
// ids, the getters' type and presence errors and the parser's type check disabled at once,
// every "refused" row failed but tokens-missing, which the empty-vocabulary check also refuses
// naming the key; on the code before these checks, every row but unsupported-type
// and quantized-norm failed (no-tensors aborted the test binary itself in Model::load).
struct Case {
  const char* variant;
  const char* names;
  Expect model;
  Expect vocab;
  bool parses = true;
};

const Case k_cases[] = {
    // Tensors. The check runs before the data is touched: a file without tensors but with
    // bytes after its metadata made generate abort in GgufFile::tensor_data (the known crash).
    {"no-tensors", "token_embd.weight", refused, works},
    {"missing-tensor", "blk.1.ffn_down.weight", refused, works},  // presence
    // An unread tensor means a feature kvchat does not implement: refused, as llama.cpp does.
    {"extra-tensor", "blk.0.attn_extra.weight", refused, works},
    {"misshapen-matrix", "blk.0.attn_k.weight", refused, works},           // shape, before any upload
    {"misshapen-vector", "output_norm.weight", refused, works},            // shape of a vector
    {"unsupported-type", "blk.0.attn_q.weight", refused, refused, false},  // the parser's type check (IQ4_XS)
    {"quantized-norm", "", works, works},  // decided: vectors of any supported type are dequantized
    // Hyperparameters: each bound or relation in ModelConfig::from_gguf.
    {"unknown-arch", "general.architecture", refused, works},
    {"layers-zero", "llama.block_count", refused, works},
    {"layers-huge", "llama.block_count", refused, works},    // the bound: 2^31 layers was std::bad_alloc, an abort
    {"layers-string", "llama.block_count", refused, works},  // the value's type
    {"heads-zero", "llama.attention.head_count", refused, works},
    {"heads-huge", "llama.attention.head_count", refused, works},  // the bound (not only "does not divide")
    {"heads-not-dividing-width", "llama.attention.head_count", refused, works},
    {"kv-heads-zero", "llama.attention.head_count_kv", refused, works},
    {"kv-heads-not-dividing", "llama.attention.head_count_kv", refused, works},
    {"head-size-huge", "llama.attention.key_length", refused, works},  // the bound: else a tensor shape error
    {"rope-dims-odd", "llama.rope.dimension_count", refused, works},
    {"ctx-zero", "llama.context_length", refused, works},
    {"ctx-huge", "llama.context_length", refused, works},        // the bound: 2^31 used to load
    {"rope-base-zero", "llama.rope.freq_base", refused, works},  // > 0: a base of 0 used to generate
    {"rope-base-negative", "llama.rope.freq_base", refused, works},
    {"rope-base-nan", "llama.rope.freq_base", refused, works},  // finite
    {"rms-eps-nan", "llama.attention.layer_norm_rms_epsilon", refused, works},
    {"rms-eps-negative", "llama.attention.layer_norm_rms_epsilon", refused, works},
    // The tokenizer: vocabulary_from_gguf and Tokenizer::create's validation.
    {"tokens-missing", "tokenizer.ggml.tokens", refused, refused},
    {"vocab-size-mismatch", "llama.vocab_size", refused, works},  // a model key: the vocabulary itself is whole
    {"scores-short", "tokenizer.ggml.scores needs one score per token", refused, refused},
    // The length check, not a later one that reads past the end of the types and happens to name the key.
    {"token-types-short", "tokenizer.ggml.token_type needs one type per token", refused, refused},
    {"bos-out-of-range", "tokenizer.ggml.bos_token_id", refused, refused},
    {"eos-out-of-range", "tokenizer.ggml.eos_token_id", refused, refused},
    {"pad-out-of-range", "tokenizer.ggml.padding_token_id", refused, refused},
    // The 1 MiB cap on the chat template (tokenize does not read it). A 100 MiB template used to
    // load, at 315 MB peak memory; now it is refused at 212 MB (the mapping and the parsed copy).
    {"huge-template", "tokenizer.chat_template", refused, works},
};

// A tiny model: 64 wide, 2 layers, 4/2 heads, stories260K's 512-piece vocabulary.
const std::string k_shape = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type f32 -t 2 -q --vocab-from " +
                            quoted(kvc::test::model_path("stories260K.gguf"));

std::vector<std::string> listed_variants(const kvc::test::TempDir& tmp) {
  auto r = cli("mkmodel --break list", tmp);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> names;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) names.push_back(line.substr(0, line.find(' ')));
  return names;
}

// Writes every variant into tmp (<variant>.gguf) and checks that the table covers exactly the
// variants mkmodel knows, so a new variant cannot go untested.
void make_variants(const kvc::test::TempDir& tmp) {
  std::set<std::string> table;
  for (const Case& c : k_cases) table.insert(c.variant);
  const auto listed = listed_variants(tmp);
  CHECK(std::set<std::string>(listed.begin(), listed.end()) == table);
  CHECK(listed.size() == table.size());
  for (const Case& c : k_cases) {
    auto r = cli(
        "mkmodel " + k_shape + " --break " + c.variant + " -o " + quoted(tmp.file(std::string(c.variant) + ".gguf")),
        tmp);
    INFO(c.variant << ": " << r.err);
    REQUIRE(r.exit_code == 0);
  }
}

// No abort, no uncaught exception, no signal: only the two exits a user can see for a model.
void check_clean_exit(const kvc::test::CliRun& r) {
  CHECK(r.exit_code >= 0);  // -1: killed by a signal
  CHECK_THAT(r.err, !Catch::Contains("ssert") && !Catch::Contains("terminate") && !Catch::Contains("what()") &&
                        !Catch::Contains("out of memory"));
}

// A run of a command on the variant: exit 0 when it works; exit 3 (invalid file, unsupported)
// with the key or tensor and the file named when it is refused.
void check_run(const Case& c, Expect e, const std::string& path, const kvc::test::CliRun& r) {
  INFO("stdout: " << r.out.substr(0, 2000));
  INFO("stderr: " << r.err.substr(0, 2000));
  check_clean_exit(r);
  if (e == works) {
    CHECK(r.exit_code == 0);
    return;
  }
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains(c.names));
  CHECK_THAT(r.err, Catch::Contains(path));
}

// A CPU backend that counts what a model allocates and uploads, to see that a refused model
// leaves nothing behind and a loaded one frees what it took.
class CountingBackend final : public kvc::backend::Backend {
 public:
  CountingBackend() : cpu_(kvc::backend::make_cpu_backend(2)) {}
  int n_uploads = 0;  // upload_weight and upload_floats calls
  int n_live = 0;     // allocations (alloc, upload_floats) not yet freed

  std::string_view name() const override { return cpu_->name(); }
  void* alloc(size_t n_bytes) override {
    void* p = cpu_->alloc(n_bytes);
    if (p) ++n_live;
    return p;
  }
  void free(void* p) override {
    if (p) --n_live;
    cpu_->free(p);
  }
  void copy_to_host(const void* src, void* dst, size_t n) override { cpu_->copy_to_host(src, dst, n); }
  void copy_from_host(const void* src, void* dst, size_t n) override { cpu_->copy_from_host(src, dst, n); }
  void copy(const void* src, void* dst, size_t n) override { cpu_->copy(src, dst, n); }
  kvc::Result<kvc::backend::Weight> upload_weight(const kvc::kernels::MatrixView& host) override {
    ++n_uploads;
    return cpu_->upload_weight(host);
  }
  kvc::Result<float*> upload_floats(const float* host, int64_t n) override {
    ++n_uploads;
    auto r = cpu_->upload_floats(host, n);
    if (r.ok()) ++n_live;
    return r;
  }
  void embed(const kvc::backend::Weight& t, const int32_t* tokens, int64_t n, float* x) override {
    cpu_->embed(t, tokens, n, x);
  }
  void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) override {
    cpu_->rmsnorm(x, w, n_tokens, n, eps, out);
  }
  void matmul(const kvc::backend::Weight& w, const float* x, int64_t n_tokens, float* y, const float* bias) override {
    cpu_->matmul(w, x, n_tokens, y, bias);
  }
  void rope(float* x, int64_t n_tokens, const int64_t* pos, int n_heads, int head_dim,
            const kvc::kernels::RopeParams& p) override {
    cpu_->rope(x, n_tokens, pos, n_heads, head_dim, p);
  }
  void kv_store(const kvc::kernels::KvBlockLayout& l, int layer, std::span<const kvc::backend::SeqSlice> s,
                const float* k, const float* v) override {
    cpu_->kv_store(l, layer, s, k, v);
  }
  void attention(const kvc::kernels::KvBlockLayout& l, int layer, std::span<const kvc::backend::SeqSlice> s,
                 const float* q, const kvc::kernels::AttentionShape& shape, int64_t window, float* out) override {
    cpu_->attention(l, layer, s, q, shape, window, out);
  }
  void silu_mul(float* gate, const float* up, int64_t n) override { cpu_->silu_mul(gate, up, n); }
  void add(float* x, const float* y, int64_t n) override { cpu_->add(x, y, n); }

 private:
  std::unique_ptr<kvc::backend::Backend> cpu_;
};

}  // namespace

TEST_CASE("hostile models: inspect, generate, tokenize and every loading command refuse each variant by name",
          "[app][e2e]") {
  kvc::test::TempDir tmp;
  make_variants(tmp);
  { std::ofstream(tmp.file("text.txt")) << std::string(400, 'a') + " Once upon a time there was a little model. "; }
  for (const Case& c : k_cases) {
    const std::string path = tmp.file(std::string(c.variant) + ".gguf"), m = " -m " + quoted(path);
    INFO("variant " << c.variant);
    bool vocabulary_only = false;
    {
      INFO("inspect");
      auto r = cli("inspect " + quoted(path), tmp);
      if (c.variant == std::string("no-tensors")) {
        // A GGUF without tensors is a vocabulary-only file to inspect: described, not refused.
        check_clean_exit(r);
        CHECK(r.exit_code == 0);
        CHECK_THAT(r.out, Catch::Contains("a vocabulary-only file"));
        vocabulary_only = true;
      } else {
        check_run(c, c.model, path, r);
      }
      // A file that parses shows its metadata and then why it cannot run, on stdout too.
      if (c.parses) CHECK_THAT(r.out, Catch::Contains("metadata ("));
      if (c.parses && c.model == refused && !vocabulary_only) {
        CHECK_THAT(r.out, Catch::Contains("cannot run: ") && Catch::Contains(c.names));
      }
      if (!c.parses) CHECK(r.out.empty());
    }
    {
      INFO("generate -n 2");
      auto r = cli("generate" + m + " -p 'Once upon a time' -n 2 --temp 0 -t 2 -q", tmp);
      check_run(c, c.model, path, r);
      if (c.model == works) CHECK(r.out.size() > 1);  // the continuation and a newline
    }
    {
      INFO("tokenize");
      auto r = cli("tokenize" + m + " -p 'Once upon a time'", tmp);
      check_run(c, c.vocab, path, r);
      if (c.vocab == works) CHECK(r.out == "1 403 407 261 378\n");  // stories260K's ids (BOS, 4 pieces)
    }
    {
      INFO("chat, logits, bench, perplexity, quantize");
      check_run(c, c.model, path, cli("chat" + m + " -n 2 --temp 0 -t 2 -q", tmp, "hello\n"));
      check_run(c, c.model, path, cli("logits" + m + " -p hi -o " + quoted(tmp.file("l.f32")) + " -t 2 -q", tmp));
      check_run(c, c.model, path, cli("bench" + m + " --pp 8 --tg 2 -r 1 -t 2 -q", tmp));
      check_run(c, c.model, path,
                cli("perplexity" + m + " -f " + quoted(tmp.file("text.txt")) + " -c 32 --chunks 1 -t 2 -q", tmp));
      const std::string out = tmp.file(std::string(c.variant) + "-q8.gguf");
      check_run(c, c.model, path, cli("quantize " + quoted(path) + " " + quoted(out) + " q8_0 -t 2 -q", tmp));
      // A refused model is not converted: nothing is written.
      CHECK(std::filesystem::exists(out) == (c.model == works));
    }
  }
}

TEST_CASE("hostile models: Model::load and read_model_info refuse each variant by name, leaving nothing loaded",
          "[app][e2e]") {
  kvc::test::TempDir tmp;
  make_variants(tmp);
  for (const Case& c : k_cases) {
    const std::string path = tmp.file(std::string(c.variant) + ".gguf");
    INFO("variant " << c.variant);
    CountingBackend be;
    {
      auto m = kvc::model::Model::load(path, be);
      auto info = kvc::ui::read_model_info(path);
      if (c.model == works) {
        INFO((m.ok() ? "" : m.error().what()) << (info.ok() ? "" : info.error().what()));
        CHECK(m.ok());
        CHECK(info.ok());
        CHECK(be.n_uploads > 0);
      } else if (!m.ok() && !info.ok()) {
        for (const kvc::Error& e : {m.error(), info.error()}) {
          INFO(e.what());
          CHECK((e.code == kvc::ErrorCode::invalid_file || e.code == kvc::ErrorCode::unsupported));
          CHECK_THAT(e.message, Catch::Contains(c.names) && Catch::Contains(path));
        }
        // The Model window shows the same reason before Load as loading gives.
        CHECK(info.error().message == m.error().message);
        // Refused before anything was allocated or uploaded.
        CHECK(be.n_uploads == 0);
      } else {
        FAIL_CHECK("not refused: Model::load " << (m.ok() ? "loaded it" : "refused it") << ", read_model_info "
                                               << (info.ok() ? "accepted it" : "refused it"));
      }
    }
    CHECK(be.n_live == 0);  // a loaded model, destroyed, freed what it took
  }
}
