// The default context: the trained context, cut to what a KV memory budget holds.
#include <catch2/catch.hpp>

#include "core/model/context_budget.h"

using namespace kvc;

TEST_CASE("default context: the trained context within the KV budget, in steps of 256", "[core]") {
  model::ModelConfig c;  // Llama-3-8B's attention: 32 layers, 8 KV heads of 128: 128 KiB a token
  c.n_layer = 32;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_ctx_train = 131072;
  CHECK(model::context_kv_bytes(c, 1) == 131072.0);
  CHECK(model::default_context(c, 0) == 8192);                    // 1 GiB by default
  CHECK(model::default_context(c, int64_t{16} << 30) == 131072);  // all of it fits 16 GiB
  CHECK(model::default_context(c, (int64_t{1} << 30) + 1000) == 8192);
  CHECK(model::default_context(c, int64_t{300} << 20) == 2304);  // 2400 tokens, down to a step of 256
  CHECK(model::default_context(c, 1) == 256);                    // never below 256
  c.n_ctx_train = 128;
  CHECK(model::default_context(c, 1) == 128);  // nor above the trained context
}
