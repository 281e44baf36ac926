// Writes a kvchat.db with the schema of main (v2): one conversation, a user message and an
// assistant answer cut off while streaming (begin + two appended chunks, never finished).
#include "storage/conversation_store.h"
#include <cstdio>
using namespace kvc::storage;
int main(int argc, char** argv) {
  auto s = ConversationStore::open_in(argv[1], {[] { return int64_t{1764547200000}; }});
  if (!s) { std::puts(s.error().message.c_str()); return 1; }
  auto& st = **s;
  ConversationSettings cs; cs.model_name = "stories260K";
  auto c = st.create_conversation("Cut off by a kill", cs);
  auto u = st.append_message(*c, 0, Role::user, "Tell me a long story.", std::vector<int32_t>{1, 2, 3});
  auto a = st.begin_assistant_message(*c, *u);
  (void)st.append_streamed(*a, "Once upon a time", {});
  (void)st.append_streamed(*a, " there was a cat", {});
  auto c2 = st.create_conversation("Finished", cs);
  auto u2 = st.append_message(*c2, 0, Role::user, "Hello", std::vector<int32_t>{4});
  auto a2 = st.begin_assistant_message(*c2, *u2);
  (void)st.append_streamed(*a2, "Hi there.", std::vector<int32_t>{5, 6});
  (void)st.finish_message(*a2);
  std::printf("%lld %lld %lld %lld\n", (long long)*u, (long long)*a, (long long)*u2, (long long)*a2);
}
