// kvchat-cli export: a conversation saved in a real data directory, as Markdown and JSON.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "support/test_support.h"

TEST_CASE("kvchat-cli export: the list, a conversation as Markdown and JSON, and bad ids named", "[app]") {
  kvc::test::TempDir tmp;
  int64_t id = 0;
  {
    auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
    REQUIRE(store.ok());
    kvc::storage::ConversationSettings settings;
    settings.system_prompt = "Be brief.";
    auto c = (*store)->create_conversation("Rivers", settings);
    REQUIRE(c.ok());
    id = *c;
    auto u = (*store)->append_message(id, 0, kvc::storage::Role::user, "How long is the Nile?", {});
    REQUIRE(u.ok());
    auto a = (*store)->begin_assistant_message(id, *u);
    REQUIRE(a.ok());
    REQUIRE((*store)->append_streamed(*a, "About 6650 km.", {}).ok());
    REQUIRE((*store)->finish_message(*a).ok());
  }
  const auto list = kvc::test::cli("export", tmp);
  CHECK(list.exit_code == 0);
  CHECK(list.out == std::to_string(id) + "\tRivers\n");

  const auto md = kvc::test::cli("export " + std::to_string(id), tmp);
  INFO(md.err);
  REQUIRE(md.exit_code == 0);
  CHECK(md.out.find("# Rivers") == 0);
  CHECK(md.out.find("## System\n\nBe brief.") != std::string::npos);
  CHECK(md.out.find("## User\n\nHow long is the Nile?") != std::string::npos);
  CHECK(md.out.find("## Assistant\n\nAbout 6650 km.") != std::string::npos);

  const auto js = kvc::test::cli(
      "export " + std::to_string(id) + " --format json -o " + kvc::test::quoted(tmp.file("c.json")), tmp);
  REQUIRE(js.exit_code == 0);
  const auto j = nlohmann::json::parse(kvc::test::read_file(tmp.path() / "c.json"));
  CHECK(j.dump().find("About 6650 km.") != std::string::npos);
  CHECK(j.dump().find("Rivers") != std::string::npos);

  const auto missing = kvc::test::cli("export 999", tmp);
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("no conversation 999") != std::string::npos);
  kvc::test::TempDir empty;
  const auto none = kvc::test::cli("export", empty);
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("kvchat.db is missing") != std::string::npos);
}
