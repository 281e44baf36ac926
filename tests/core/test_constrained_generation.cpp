// Grammar-constrained generation on the random-weight test model: every output of 200
// generations with random seeds parses as JSON and validates against its schema (checked by an
// independent validator), through a Session and through the batching Engine.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/model/session.h"
#include "core/sampling/json_schema_grammar.h"
#include "support/json_schema_check.h"
#include "support/model_fixture.h"

using namespace kvc;
using nlohmann::json;

namespace {

// Schemas whose every value is bounded, so that even a random model finishes them.
const std::vector<std::string> k_schemas = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0},
        "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},"ok":{"type":"boolean"},
        "note":{"type":["string","null"],"maxLength":5}},"required":["name","age","tags"],"additionalProperties":false})",
    R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":4})",
    R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},
        "kind":{"const":"part"},"size":{"enum":["S","M","L",null]}},"required":["code","kind","size"],
        "additionalProperties":false})",
    R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":4},{"type":"object","properties":{"k":{"type":"boolean"}},
        "required":["k"],"additionalProperties":false}]})",
    R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}}})",
};

sampling::GenerateOptions constrained(const std::string& schema, int64_t seed) {
  sampling::GenerateOptions o;
  o.max_tokens = 600;
  o.sampling.temperature = 1.0f;  // the whole allowed distribution: no top-k / top-p / min-p
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  o.sampling.seed = seed;
  auto g = sampling::json_schema_grammar(schema);
  REQUIRE(g.ok());
  o.grammar = *g;
  return o;
}

void check_valid(const std::string& text, const std::string& schema) {
  INFO("output: " << text);
  const json v = json::parse(text, nullptr, false);
  REQUIRE_FALSE(v.is_discarded());
  CHECK(test::schema_violation(v, json::parse(schema)) == "");
}

}  // namespace

TEST_CASE("constrained generation: 200 outputs with random seeds validate against their schemas", "[core][slow]") {
  test::LoadedModel f;
  const std::vector<int32_t> prompt = f.m->tokenizer().encode("Reply with JSON:", true, false);
  const uint64_t master = std::random_device{}();
  INFO("master seed " << master);
  std::mt19937_64 seeds(master);
  int n_complete = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string& schema = k_schemas[static_cast<size_t>(i) % k_schemas.size()];
    const auto seed = static_cast<int64_t>(seeds() >> 1);
    INFO("generation " << i << ", seed " << seed);
    auto s = model::Session::create(*f.m, 1024);
    REQUIRE(s.ok());
    auto r = model::generate(*s, prompt, constrained(schema, seed));
    REQUIRE(r.ok());
    REQUIRE(r->reason == model::StopReason::end_of_generation);  // the grammar completed, within max_tokens
    check_valid(r->text, schema);
    ++n_complete;
  }
  CHECK(n_complete == 200);
}

TEST_CASE("constrained generation: batched requests in the engine each follow their own schema", "[core]") {
  test::LoadedModel f;
  auto layout = kernels::make_kv_block_layout(
      static_cast<int>(f.m->config().n_layer), static_cast<int>(f.m->config().n_head_kv),
      static_cast<int>(f.m->config().head_dim), 16, kernels::KvType::f16, kernels::KvType::f16);
  REQUIRE(layout);
  kv::KvCacheConfig c;
  c.layout = *layout;
  c.t0_bytes = 512 * layout->block_bytes;
  c.t1_bytes = 64 * layout->block_bytes;
  c.fingerprint = model::kv_fingerprint(*f.m, *layout);
  auto cache = kv::KvCache::create(c, *f.be);
  REQUIRE(cache.ok());
  engine::EngineOptions eo;
  eo.max_running = 8;
  engine::Engine eng(*f.m, **cache, eo);
  const std::vector<int32_t> prompt = f.m->tokenizer().encode("Reply with JSON:", true, false);
  std::vector<engine::RequestId> ids;
  for (size_t i = 0; i < 2 * k_schemas.size(); ++i) {
    ids.push_back(
        eng.submit({0, prompt, constrained(k_schemas[i % k_schemas.size()], 1000 + static_cast<int64_t>(i)), {}, {}}));
  }
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto r = eng.result(ids[i]);
    REQUIRE(r);
    INFO("request " << i << ": " << r->error.message);
    REQUIRE(r->state == engine::RequestState::finished);
    CHECK(r->reason == model::StopReason::end_of_generation);
    check_valid(r->text, k_schemas[i % k_schemas.size()]);
  }
  CHECK(eng.stats().max_batch_rows > 1);  // they shared forward passes
}
