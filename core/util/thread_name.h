// Names the calling thread, as top -H, perf and debuggers show it (Linux: 15 characters at most).
#pragma once

namespace kvc {

// A longer name is cut to 15 characters; where threads cannot be named this does nothing.
void set_thread_name(const char* name);

}  // namespace kvc
