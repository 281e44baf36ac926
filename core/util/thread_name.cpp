// set_thread_name: pthread_setname_np on Linux, nothing elsewhere.
#include "core/util/thread_name.h"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace kvc {

void set_thread_name(const char* name) {
#if defined(__linux__)
  const std::string cut(name, std::min<size_t>(std::strlen(name), 15));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
#else
  (void)name;
#endif
}

}  // namespace kvc
