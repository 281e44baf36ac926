// GgufFile: opening, metadata look-ups with typed getters, and tensor access.
#include "core/gguf/gguf_file.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>

#include "core/gguf/gguf_format.h"
#include "core/util/assert.h"

namespace kvc::gguf {

int64_t TensorInfo::n_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  Result<ByteSource> bytes = ByteSource::map_file(path);
  if (!bytes.ok()) return bytes.error();
  Result<GgufFile> f = parse(std::move(bytes).value());
  if (!f.ok()) return make_error(f.error().code, path + ": " + f.error().message);
  return f;
}

Result<GgufFile> GgufFile::from_memory(std::vector<uint8_t> bytes) { return parse(ByteSource(std::move(bytes))); }

const Value* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const TensorInfo& t) const {
  KVC_ASSERT(!tensors_.empty() && &t >= tensors_.data() && &t < tensors_.data() + tensors_.size());
  return bytes_.data() + data_offset_ + t.offset;
}

std::span<const uint8_t> GgufFile::data_section() const {
  if (data_offset_ >= bytes_.size()) return {};
  return {bytes_.data() + data_offset_, bytes_.size() - data_offset_};
}

bool GgufFile::check_invariants() const {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || data_offset_ % alignment_ != 0) return false;
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) {
    const kernels::DTypeInfo* info = kernels::dtype_info(static_cast<uint32_t>(t.type));
    if (info == nullptr || t.shape.empty() || t.shape.size() > k_max_dims) return false;
    if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 1; })) return false;
    if (t.shape[0] % info->block_elems != 0) return false;
    if (t.n_bytes != static_cast<size_t>(t.n_elements() / info->block_elems) * info->block_bytes) return false;
    if (t.offset % alignment_ != 0 || data_offset_ > bytes_.size()) return false;
    if (t.offset > bytes_.size() - data_offset_ || t.n_bytes > bytes_.size() - data_offset_ - t.offset) return false;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    if (by_offset[k - 1]->offset + by_offset[k - 1]->n_bytes > by_offset[k]->offset) return false;
  }
  return true;
}

// ---- typed getters ----

namespace {

Error mismatch(std::string_view key, const char* expected, const std::string& found) {
  return make_error(ErrorCode::invalid_file,
                    "metadata " + printable(key) + ": expected " + expected + ", found " + found);
}

Error missing(std::string_view key) {
  return make_error(ErrorCode::invalid_file,
                    "metadata " + printable(key) + ": missing (the model file does not define it)");
}

// Integer value types (bool is stored as bool, not as an integer).
template <typename T>
constexpr bool k_is_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  if (const std::string* s = v->as<std::string>()) return *s;
  return mismatch(key, "a string", describe(*v));
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  return std::visit(
      [&](const auto& x) -> Result<uint64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (k_is_int<T> && std::is_unsigned_v<T>) {
          return static_cast<uint64_t>(x);
        } else if constexpr (k_is_int<T>) {
          if (x >= 0) return static_cast<uint64_t>(x);
          return mismatch(key, "an unsigned integer", describe(*v) + " " + std::to_string(x));
        } else {
          return mismatch(key, "an unsigned integer", describe(*v));
        }
      },
      v->storage());
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  return std::visit(
      [&](const auto& x) -> Result<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (k_is_int<T> && std::is_signed_v<T>) {
          return static_cast<int64_t>(x);
        } else if constexpr (k_is_int<T>) {
          if (static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            return static_cast<int64_t>(x);
          }
          return mismatch(key, "a signed 64-bit integer", describe(*v) + " " + std::to_string(x) + " (too large)");
        } else {
          return mismatch(key, "an integer", describe(*v));
        }
      },
      v->storage());
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  if (const float* f = v->as<float>()) return static_cast<double>(*f);
  if (const double* d = v->as<double>()) return *d;
  return mismatch(key, "a float (f32 or f64)", describe(*v));
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  if (const bool* b = v->as<bool>()) return *b;
  return mismatch(key, "a bool", describe(*v));
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  if (const Array* a = v->as<Array>()) {
    if (const auto* s = a->as<std::string>()) return *s;
  }
  return mismatch(key, "an array of string", describe(*v));
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  if (const Array* a = v->as<Array>()) {
    if (const auto* f = a->as<float>()) return *f;
  }
  return mismatch(key, "an array of f32", describe(*v));
}

Result<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return missing(key);
  const Array* a = v->as<Array>();
  if (a == nullptr) return mismatch(key, "an array of i32", describe(*v));
  return std::visit(
      [&](const auto& elems) -> Result<std::vector<int32_t>> {
        using T = typename std::decay_t<decltype(elems)>::value_type;
        if constexpr (k_is_int<T>) {
          std::vector<int32_t> out;
          out.reserve(elems.size());
          for (size_t i = 0; i < elems.size(); ++i) {
            const T x = elems[i];
            if (!std::in_range<int32_t>(x)) {
              return mismatch(key, "an array of i32",
                              describe(*v) + " whose element " + std::to_string(i) + " (" + std::to_string(x) +
                                  ") does not fit in i32");
            }
            out.push_back(static_cast<int32_t>(x));
          }
          return out;
        } else {
          return mismatch(key, "an array of i32", describe(*v));
        }
      },
      a->elements());
}

Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return find(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}
Result<uint64_t> GgufFile::get_uint_or(std::string_view key, uint64_t fallback) const {
  return find(key) ? get_uint(key) : Result<uint64_t>(fallback);
}
Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return find(key) ? get_int(key) : Result<int64_t>(fallback);
}
Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  return find(key) ? get_float(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return find(key) ? get_bool(key) : Result<bool>(fallback);
}

}  // namespace kvc::gguf
