// kvchat-cli perplexity: perplexity of a text, and how a quantized KV cache changes the logits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "app/cli/cli_common.h"
#include "core/kv/kv_format.h"
#include "core/model/session.h"

namespace kvc::cli {

namespace {

struct PerplexityArgs {
  ModelOptions model;
  std::string file;
  std::string kv_type = "f16";
  std::string k_type, v_type;  // override kv_type for K or V alone
  int64_t max_chunks = 0;
  int64_t greedy = 0;  // > 0: also compare greedy continuations of `prompt`
  std::string prompt = "Once upon a time";
};

// log-softmax of one row into out; returns nothing, out[i] = log p(i).
void log_softmax(std::span<const float> row, std::vector<double>& out) {
  double m = -1e300;
  for (float x : row) m = std::max(m, static_cast<double>(x));
  double z = 0;
  for (float x : row) z += std::exp(static_cast<double>(x) - m);
  const double lz = m + std::log(z);
  out.resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = static_cast<double>(row[i]) - lz;
}

int run_perplexity(PerplexityArgs a) {
  auto fmt = parse_kv_type("--kv-type", a.kv_type);
  if (!fmt.ok()) return report(fmt.error());
  auto k_fmt = a.k_type.empty() ? fmt : parse_kv_type("--k-type", a.k_type);
  auto v_fmt = a.v_type.empty() ? fmt : parse_kv_type("--v-type", a.v_type);
  if (!k_fmt.ok()) return report(k_fmt.error());
  if (!v_fmt.ok()) return report(v_fmt.error());
  const std::string kv_name =
      *k_fmt == *v_fmt ? std::string(kv::kv_format_name(*k_fmt))
                       : std::string(kv::kv_format_name(*k_fmt)) + "/" + std::string(kv::kv_format_name(*v_fmt));
  auto text = read_text_file(a.file, "text file");
  if (!text.ok()) return report(text.error());
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  const auto ids = m.tokenizer().encode(*text, m.tokenizer().wants_bos(), false);
  const int64_t n_ctx = a.model.n_ctx > 0 ? a.model.n_ctx : 512;
  if (static_cast<int64_t>(ids.size()) < 2 * std::min<int64_t>(n_ctx, 16)) {
    return report(
        make_error(ErrorCode::invalid_argument, "the text is too short: " + std::to_string(ids.size()) + " tokens"));
  }
  model::SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = std::min<int64_t>(a.model.n_batch, n_ctx);
  auto ref = model::Session::create(m, o);  // F16 KV, the reference
  o.k_format = *k_fmt;
  o.v_format = *v_fmt;
  auto test = model::Session::create(m, o);
  if (!ref.ok()) return report(ref.error());
  if (!test.ok()) return report(test.error());

  const auto n_vocab = static_cast<size_t>(m.config().n_vocab);
  double nll_ref = 0, nll_test = 0, kl = 0;
  int64_t n_scored = 0, n_top1_same = 0, n_chunks = 0;
  std::vector<double> lp_ref, lp_test;
  Progress bar("perplexity", a.model.quiet);
  const auto total_chunks = static_cast<int64_t>(ids.size()) / n_ctx + (ids.size() % static_cast<size_t>(n_ctx) > 1);
  for (size_t begin = 0; begin + 1 < ids.size(); begin += static_cast<size_t>(n_ctx)) {
    if (a.max_chunks > 0 && n_chunks >= a.max_chunks) break;
    const auto chunk =
        std::span<const int32_t>(ids).subspan(begin, std::min<size_t>(static_cast<size_t>(n_ctx), ids.size() - begin));
    auto lr = ref->evaluate_all(chunk);
    if (!lr.ok()) return report(lr.error());
    const std::vector<float> ref_logits(lr->begin(), lr->end());
    auto lt = test->evaluate_all(chunk);
    if (!lt.ok()) return report(lt.error());
    // Score the second half of each chunk, where every prediction has context.
    for (size_t i = chunk.size() / 2; i + 1 < chunk.size(); ++i) {
      log_softmax(std::span<const float>(ref_logits).subspan(i * n_vocab, n_vocab), lp_ref);
      log_softmax(lt->subspan(i * n_vocab, n_vocab), lp_test);
      const auto next = static_cast<size_t>(chunk[i + 1]);
      nll_ref -= lp_ref[next];
      nll_test -= lp_test[next];
      double d = 0;
      size_t top_r = 0, top_t = 0;
      for (size_t v = 0; v < n_vocab; ++v) {
        d += std::exp(lp_ref[v]) * (lp_ref[v] - lp_test[v]);
        if (lp_ref[v] > lp_ref[top_r]) top_r = v;
        if (lp_test[v] > lp_test[top_t]) top_t = v;
      }
      kl += d;
      n_top1_same += top_r == top_t;
      ++n_scored;
    }
    ++n_chunks;
    bar.update(static_cast<double>(n_chunks) / static_cast<double>(std::max<int64_t>(total_chunks, 1)));
  }
  bar.done();
  const double ns = static_cast<double>(n_scored);
  std::printf("model       %s\n", m.path().c_str());
  std::printf("tokens      %zu (%lld chunks of %lld, %lld predictions scored)\n", ids.size(),
              static_cast<long long>(n_chunks), static_cast<long long>(n_ctx), static_cast<long long>(n_scored));
  const kernels::KvBlockLayout& lr = ref->cache().layout();
  const kernels::KvBlockLayout& lt = test->cache().layout();
  std::printf("kv bytes    f16 %.1f, %s %.1f per token (%.4fx; scale group %d)\n",
              static_cast<double>(lr.block_bytes) / lr.block_tokens, kv_name.c_str(),
              static_cast<double>(lt.block_bytes) / lt.block_tokens,
              static_cast<double>(lt.block_bytes) / static_cast<double>(lr.block_bytes), lt.group);
  std::printf("ppl f16     %.4f\n", std::exp(nll_ref / ns));
  std::printf("ppl %-7s %.4f\n", kv_name.c_str(), std::exp(nll_test / ns));
  std::printf("KL(f16 || %s)  %.8f nats/token (mean)\n", kv_name.c_str(), kl / ns);
  std::printf("top-1 agree %.2f %%\n", 100.0 * static_cast<double>(n_top1_same) / ns);
  if (a.greedy > 0) {
    // Greedy continuations of the prompt with F16 KV and with the tested formats, from empty caches.
    const auto prompt = m.tokenizer().encode(a.prompt, m.tokenizer().wants_bos(), false);
    model::SessionOptions go = o;
    go.n_ctx = static_cast<int64_t>(prompt.size()) + a.greedy + 1;
    go.n_batch = std::min<int64_t>(a.model.n_batch, go.n_ctx);
    std::vector<model::Session> sessions;
    for (int i = 0; i < 2; ++i) {
      go.k_format = i == 0 ? kv::KvFormat::f16 : *k_fmt;
      go.v_format = i == 0 ? kv::KvFormat::f16 : *v_fmt;
      auto sess = model::Session::create(m, go);
      if (!sess.ok()) return report(sess.error());
      sessions.push_back(std::move(*sess));
    }
    // Both runs follow the F16 run's tokens, so the test run's choice is compared at every step.
    std::vector<int32_t> step(prompt.begin(), prompt.end());
    int64_t same = 0, n_agree = 0;
    bool on_track = true;
    double margin_at_split = 0;
    for (int64_t i = 0; i < a.greedy; ++i) {
      auto gr = i == 0 ? sessions[0].evaluate(step) : sessions[0].append(step);
      if (!gr.ok()) return report(gr.error());
      const std::vector<float> ref_row(gr->begin(), gr->end());
      auto gt = i == 0 ? sessions[1].evaluate(step) : sessions[1].append(step);
      if (!gt.ok()) return report(gt.error());
      const auto top_r = std::max_element(ref_row.begin(), ref_row.end()) - ref_row.begin();
      const auto top_t = std::max_element(gt->begin(), gt->end()) - gt->begin();
      if (top_r == top_t) {
        ++n_agree;
        same += on_track;
      } else if (on_track) {
        on_track = false;
        std::vector<float> sorted = ref_row;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        margin_at_split = sorted[0] - sorted[1];
      }
      step.assign(1, static_cast<int32_t>(top_r));
    }
    std::printf("greedy      %lld of %lld tokens on the F16 continuation (prompt \"%s\")", static_cast<long long>(same),
                static_cast<long long>(a.greedy), a.prompt.c_str());
    if (!on_track) std::printf("; F16's top-2 logit margin there %.4f", margin_at_split);
    std::printf("\n            %lld of %lld greedy choices agree along the F16 continuation\n",
                static_cast<long long>(n_agree), static_cast<long long>(a.greedy));
  }
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text with a KV format, against F16 KV (KL, top-1)");
  add_model_options(*cmd, a->model);
  cmd->add_option("-f,--file", a->file, "text file")->required();
  cmd->add_option("--kv-type", a->kv_type, "KV cache format: f16, int8, int4, int8h, int4h, int4c")
      ->capture_default_str();
  cmd->add_option("--k-type", a->k_type, "K format, overriding --kv-type for K");
  cmd->add_option("--v-type", a->v_type, "V format, overriding --kv-type for V");
  cmd->add_option("--chunks", a->max_chunks, "score at most this many chunks (0: all)");
  cmd->add_option("--greedy", a->greedy,
                  "also generate this many greedy tokens of --prompt with F16 and the tested KV, "
                  "and count how long they agree")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-p,--prompt", a->prompt, "prompt of the greedy comparison")->capture_default_str();
  cmd->callback([a] {
    if (int rc = run_perplexity(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
