// Names of error codes, for messages.
#include "core/util/result.h"

namespace kvc {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::io: return "I/O error";
    case ErrorCode::invalid_file: return "invalid file";
    case ErrorCode::unsupported: return "not supported";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::internal: return "internal error";
  }
  return "error";
}

}  // namespace kvc
