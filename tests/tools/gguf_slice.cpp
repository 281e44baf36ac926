// kvc_gguf_slice: copies the first rows of every tensor of a GGUF into a small GGUF, so that
// reference bytes written by another program (llama.cpp's quantizer) can live in tests/data.
//   usage: kvc_gguf_slice IN.gguf OUT.gguf N_ROWS
// Metadata is dropped except general.architecture and general.file_type; 1-D tensors are kept whole.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"
#include "kernels/cpu/quant.h"

int main(int argc, char** argv) {
  using namespace kvc;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf N_ROWS\n", argv[0]);
    return 2;
  }
  const long n_rows = std::strtol(argv[3], nullptr, 10);
  auto in = gguf::GgufFile::open(argv[1]);
  if (!in.ok() || n_rows <= 0) {
    std::fprintf(stderr, "%s\n", in.ok() ? "N_ROWS must be positive" : in.error().what().c_str());
    return 1;
  }
  gguf::GgufWriter w;
  for (const char* key : {"general.architecture", "general.file_type"}) {
    if (const gguf::Value* v = in->find(key)) w.set(key, *v);
  }
  for (const gguf::TensorInfo& t : in->tensors()) {
    std::vector<int64_t> shape = t.shape;
    size_t n_bytes = t.n_bytes;
    if (shape.size() == 2) {
      shape[1] = std::min<int64_t>(shape[1], n_rows);
      n_bytes = kernels::row_bytes(t.type, shape[0]) * static_cast<size_t>(shape[1]);
    }
    const uint8_t* p = in->tensor_data(t);
    w.add_tensor(t.name, shape, t.type, std::vector<uint8_t>(p, p + n_bytes));
  }
  if (Status st = w.write(argv[2]); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.error().what().c_str());
    return 1;
  }
  return 0;
}
