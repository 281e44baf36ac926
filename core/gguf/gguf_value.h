// GGUF metadata values: the thirteen value types, arrays (possibly nested) and their names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kvc::gguf {

// Numbered as the file format numbers them.
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

inline constexpr uint32_t k_n_value_types = 13;

// "u32", "string", "array", ...
const char* to_string(ValueType t);
// Bytes of one value of a fixed-size type on disk; 0 for string and array.
size_t fixed_value_bytes(ValueType t);

class Array;

// Each alternative's index equals the ValueType it stores (ArrayElements::index() == type).
using ArrayElements = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                                   std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                                   std::vector<float>, std::vector<bool>, std::vector<std::string>, std::vector<Array>,
                                   std::vector<uint64_t>, std::vector<int64_t>, std::vector<double>>;

// A typed array of metadata values. Every element has the same type; an array of arrays
// holds inner arrays that each carry their own element type. Strings are bytes, not
// necessarily UTF-8.
class Array {
 public:
  Array() = default;  // an empty array of u8
  // NOLINTBEGIN(bugprone-forwarding-reference-overload): the requires clause rules out Array itself
  template <typename V>
  requires(!std::is_same_v<std::remove_cvref_t<V>, Array> &&
           std::is_constructible_v<ArrayElements, V&&>) explicit Array(V&& elements)
      : elements_(std::forward<V>(elements)) {}
  // NOLINTEND(bugprone-forwarding-reference-overload)

  ValueType element_type() const { return static_cast<ValueType>(elements_.index()); }
  size_t size() const;
  bool empty() const { return size() == 0; }

  // The elements if they are of type T (std::vector<T>), else null.
  template <typename T>
  const std::vector<T>* as() const {
    return std::get_if<std::vector<T>>(&elements_);
  }
  const ArrayElements& elements() const { return elements_; }

  friend bool operator==(const Array&, const Array&) = default;

 private:
  ArrayElements elements_;
};

// Each alternative's index equals the ValueType it stores (ValueStorage::index() == type).
using ValueStorage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                                  Array, uint64_t, int64_t, double>;

// One metadata value of any type. Constructed from exactly-typed C++ values so that the
// type written to a file is never a surprise (Value(uint32_t{5}) is u32, Value("x") a string).
class Value {
 public:
  Value() = default;                                 // u8 0
  Value(uint8_t v) : v_(v) {}                        // NOLINT: implicit by design, one per value type
  Value(int8_t v) : v_(v) {}                         // NOLINT
  Value(uint16_t v) : v_(v) {}                       // NOLINT
  Value(int16_t v) : v_(v) {}                        // NOLINT
  Value(uint32_t v) : v_(v) {}                       // NOLINT
  Value(int32_t v) : v_(v) {}                        // NOLINT
  Value(float v) : v_(v) {}                          // NOLINT
  Value(bool v) : v_(v) {}                           // NOLINT
  Value(std::string v) : v_(std::move(v)) {}         // NOLINT
  Value(std::string_view v) : v_(std::string(v)) {}  // NOLINT
  Value(const char* v) : v_(std::string(v)) {}       // NOLINT
  Value(Array v) : v_(std::move(v)) {}               // NOLINT
  Value(uint64_t v) : v_(v) {}                       // NOLINT
  Value(int64_t v) : v_(v) {}                        // NOLINT
  Value(double v) : v_(v) {}                         // NOLINT

  ValueType type() const { return static_cast<ValueType>(v_.index()); }
  // The value if it is a T, else null (T is one of ValueStorage's alternatives).
  template <typename T>
  const T* as() const {
    return std::get_if<T>(&v_);
  }
  const ValueStorage& storage() const { return v_; }

  friend bool operator==(const Value&, const Value&) = default;

 private:
  ValueStorage v_;
};

// What a value is, for messages: "u32", "string", "array of string", "array of array".
std::string describe(const Value& v);

}  // namespace kvc::gguf
