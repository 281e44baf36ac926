// Writes a few small valid GGUF files into a folder, as seeds for fuzz_gguf.
#include <cstdio>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"

using kvc::gguf::Array;
using kvc::gguf::GgufWriter;
using kvc::kernels::DType;

namespace {

bool save(const GgufWriter& w, const std::string& dir, const char* name) {
  const kvc::Status s = w.write(dir + "/" + name);
  if (!s.ok()) std::fprintf(stderr, "fuzz_gguf_seeds: %s\n", s.error().what().c_str());
  return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_gguf_seeds OUTPUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;

  GgufWriter values;  // every value type, nested and empty arrays
  values.set_u8("u8", 1);
  values.set_i8("i8", -1);
  values.set_u16("u16", 2);
  values.set_i16("i16", -2);
  values.set_u32("u32", 3);
  values.set_i32("i32", -3);
  values.set_f32("f32", 0.5f);
  values.set_bool("bool", true);
  values.set_string("string", "llama");
  values.set_u64("u64", 4);
  values.set_i64("i64", -4);
  values.set_f64("f64", 0.25);
  values.set_string_array("tokens", {"<unk>", "<s>", "", "a"});
  values.set_vector("scores", std::vector<float>{0.f, -1.f, 2.f});
  values.set_vector("flags", std::vector<bool>{true, false});
  values.set_vector("nested", std::vector<Array>{Array(std::vector<int32_t>{1}), Array(std::vector<Array>{})});
  ok &= save(values, dir, "values.gguf");

  GgufWriter tensors;  // one tensor of each readable type, custom alignment
  tensors.set_alignment(64);
  tensors.set_string("general.architecture", "llama");
  tensors.add_tensor("f32", {4, 2}, DType::f32, std::vector<uint8_t>(32, 1));
  tensors.add_tensor("f16", {3}, DType::f16, std::vector<uint8_t>(6, 2));
  tensors.add_tensor("bf16", {2, 1, 1}, DType::bf16, std::vector<uint8_t>(4, 3));
  tensors.add_tensor("q8_0", {32}, DType::q8_0, std::vector<uint8_t>(34, 4));
  tensors.add_tensor("q4_0", {32, 2}, DType::q4_0, std::vector<uint8_t>(36, 5));
  tensors.add_tensor("q4_k", {256}, DType::q4_k, std::vector<uint8_t>(144, 6));
  tensors.add_tensor("q6_k", {256, 1, 1, 1}, DType::q6_k, std::vector<uint8_t>(210, 7));
  ok &= save(tensors, dir, "tensors.gguf");

  GgufWriter empty;
  ok &= save(empty, dir, "empty.gguf");
  return ok ? 0 : 1;
}
