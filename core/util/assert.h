// KVC_ASSERT: a bug check that stays on in release builds; it never guards user input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KVC_ASSERT(cond)                                                                         \
  do {                                                                                           \
    if (!(cond)) [[unlikely]] {                                                                  \
      std::fprintf(stderr, "kvchat: assertion failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)
