// Tests under a sanitizer: whether this build has one, and the counts of randomised loops.
#pragma once

#include <cstdlib>

namespace kvc::test {

// True in a build under AddressSanitizer or ThreadSanitizer (the fuzz, tsan, asan and debug
// presets), where the engine runs 5-30 times slower than in the release build.
inline bool under_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// How many times a randomised, bounded loop runs: $env when it is set to a positive number (the
// documented full runs), else `sanitized` under a sanitizer, else `release`. A smaller count
// repeats the same checks fewer times; it drops none of them.
inline int loop_count(const char* env, int release, int sanitized) {
  const char* v = env != nullptr ? std::getenv(env) : nullptr;
  if (v != nullptr && *v != '\0') {
    const int n = std::atoi(v);
    if (n > 0) return n;
  }
  return under_sanitizer() ? sanitized : release;
}

}  // namespace kvc::test
