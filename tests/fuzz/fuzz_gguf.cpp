// libFuzzer target for the GGUF reader: parse, walk everything, re-encode, parse again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_writer.h"

namespace {

using kvc::gguf::Array;
using kvc::gguf::GgufFile;
using kvc::gguf::Value;

volatile uint64_t g_sink;  // keeps the walks from being optimised away

void touch(const Array& a);

template <typename T>
void touch_element(const T& x) {
  if constexpr (std::is_same_v<T, std::string>) {
    for (char c : x) g_sink = g_sink + static_cast<uint8_t>(c);
  } else if constexpr (std::is_same_v<T, Array>) {
    touch(x);
  } else if constexpr (std::is_floating_point_v<T>) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));  // NaN and infinity cannot be cast to an integer
    g_sink = g_sink + b[0];
  } else {
    g_sink = g_sink + static_cast<uint64_t>(x);  // integers and bool
  }
}

void touch(const Value& v) {
  std::visit([](const auto& x) { touch_element(x); }, v.storage());
}

void touch(const Array& a) {
  std::visit(
      [](const auto& elems) {
        for (const auto& e : elems) {
          if constexpr (std::is_same_v<std::decay_t<decltype(elems)>, std::vector<bool>>) {
            touch_element(static_cast<bool>(e));
          } else {
            touch_element(e);
          }
        }
      },
      a.elements());
}

// Everything a parsed file offers must be usable without a fault.
void walk(const GgufFile& f) {
  for (const auto& e : f.metadata()) {
    touch(e.value);
    if (f.find(e.key) != &e.value) std::abort();
    (void)f.get_uint(e.key);
    (void)f.get_int(e.key);
    (void)f.get_float(e.key);
    (void)f.get_string(e.key);
    (void)f.get_bool(e.key);
    (void)f.get_string_array(e.key);
    (void)f.get_f32_array(e.key);
    (void)f.get_i32_array(e.key);
  }
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    const uint8_t* p = f.tensor_data(t);
    g_sink = g_sink + p[0] + p[t.n_bytes - 1] + static_cast<uint64_t>(t.n_elements());
  }
  if (!f.check_invariants()) std::abort();
}

// A file the reader accepts must be writable, and the writer's output must be a fixed point.
std::vector<uint8_t> rewrite(const GgufFile& f) {
  kvc::gguf::GgufWriter w;
  for (const auto& e : f.metadata()) w.set(e.key, e.value);
  for (const auto& t : f.tensors()) w.add_tensor_view(t.name, t.shape, t.type, {f.tensor_data(t), t.n_bytes});
  auto bytes = w.write_to_memory();
  if (!bytes.ok()) std::abort();
  return std::move(bytes).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = GgufFile::from_memory(std::vector<uint8_t>(data, data + size));
  if (!f.ok()) {
    if (f.error().message.empty()) std::abort();
    return 0;
  }
  walk(*f);
  std::vector<uint8_t> once = rewrite(*f);
  auto again = GgufFile::from_memory(once);
  if (!again.ok()) std::abort();
  walk(*again);
  if (rewrite(*again) != once) std::abort();
  return 0;
}
