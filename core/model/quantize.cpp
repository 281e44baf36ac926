// Model quantization: stream each tensor through dequantize -> quantize into a new GGUF.
#include "core/model/quantize.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "core/model/model_check.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace kvc::model {

Status quantize_model(const std::string& in_path, const std::string& out_path, FileType target, int n_threads,
                      const std::function<void(size_t, size_t)>& progress) {
  auto in = gguf::GgufFile::open(in_path);
  if (!in.ok()) return in.error();
  const gguf::GgufFile& f = *in;
  // Only a model kvchat could run is converted: a broken one is refused, not copied.
  auto checked = check_model_file(f);
  if (!checked.ok()) return make_error(checked.error().code, in_path + ": " + checked.error().message);
  const ModelConfig& c = checked->config;
  const PolicyModel policy{c.n_layer, c.n_head / c.n_head_kv, !c.tied_embeddings};

  gguf::GgufWriter w;
  for (const auto& e : f.metadata()) {
    if (e.key != "general.alignment") w.set(e.key, e.value);
  }
  w.set_u32("general.file_type", gguf_file_type(target));

  auto pool = std::make_shared<kernels::ThreadPool>(n_threads > 0 ? n_threads : kernels::default_thread_count());
  size_t total = 0;
  std::vector<kernels::DType> out_types;
  for (const auto& t : f.tensors()) {
    const auto dst = tensor_type(target, t.name, static_cast<int>(t.shape.size()), t.shape[0], policy);
    out_types.push_back(dst);
    total += kernels::row_bytes(dst, t.shape[0]) * static_cast<size_t>(t.n_elements() / t.shape[0]);
  }
  auto done = std::make_shared<size_t>(0);
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const gguf::TensorInfo& t = f.tensors()[i];
    const kernels::DType dst = out_types[i];
    if (dst == t.type) {
      w.add_tensor_view(t.name, t.shape, t.type, {f.tensor_data(t), t.n_bytes});
      *done += t.n_bytes;
      continue;
    }
    w.add_tensor_stream(
        t.name, t.shape, dst, [&t, &f, dst, pool, done, total, &progress](const gguf::ByteSink& sink) -> Status {
          const int64_t n_cols = t.shape[0];
          const int64_t n_rows = t.n_elements() / n_cols;
          const size_t in_row = kernels::row_bytes(t.type, n_cols), out_row = kernels::row_bytes(dst, n_cols);
          const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>((size_t{4} << 20) / out_row));
          const uint8_t* src = f.tensor_data(t);
          std::vector<uint8_t> buf;
          std::vector<std::vector<float>> scratch(static_cast<size_t>(pool->n_threads()));
          for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
            const int64_t r1 = std::min(n_rows, r0 + chunk);
            buf.resize(static_cast<size_t>(r1 - r0) * out_row);
            pool->run([&](int ith, int nth) {
              auto& row = scratch[static_cast<size_t>(ith)];
              row.resize(static_cast<size_t>(n_cols));
              for (int64_t r = r0 + (r1 - r0) * ith / nth; r < r0 + (r1 - r0) * (ith + 1) / nth; ++r) {
                kernels::dequantize_row(t.type, src + static_cast<size_t>(r) * in_row, row.data(), n_cols);
                kernels::quantize_row(dst, row.data(), buf.data() + static_cast<size_t>(r - r0) * out_row, n_cols);
              }
            });
            KVC_TRY(sink(buf));
            *done += buf.size();
            if (progress) progress(*done, total);
          }
          return {};
        });
  }
  return w.write(out_path);
}

}  // namespace kvc::model
