// Names and on-disk sizes of GGUF metadata value types.
#include "core/gguf/gguf_value.h"

namespace kvc::gguf {

const char* to_string(ValueType t) {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "unknown type";
}

size_t fixed_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64: return 8;
    case ValueType::string:
    case ValueType::array: return 0;
  }
  return 0;
}

size_t Array::size() const {
  return std::visit([](const auto& v) { return v.size(); }, elements_);
}

std::string describe(const Value& v) {
  if (const Array* a = v.as<Array>()) return std::string("array of ") + to_string(a->element_type());
  return to_string(v.type());
}

}  // namespace kvc::gguf
