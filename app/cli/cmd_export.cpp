// kvchat-cli export: a saved conversation's active branch as Markdown or JSON (or the list of them).
#include <cstdio>
#include <fstream>

#include "app/cli/cli_common.h"
#include "storage/conversation_store.h"
#include "storage/data_dir.h"

namespace kvc::cli {

namespace {

struct ExportArgs {
  int64_t id = 0;
  std::string format = "md";
  std::string output;
  std::string data_dir;
};

int run_export(const ExportArgs& a) {
  const auto dir = storage::resolve_data_dir(a.data_dir);
  if (!std::filesystem::exists(dir / "kvchat.db")) {
    return report(
        make_error(ErrorCode::invalid_argument, "no conversations in " + dir.string() + " (kvchat.db is missing)"));
  }
  auto store = storage::ConversationStore::open_in(dir);
  if (!store.ok()) return report(store.error());
  if (a.id == 0) {  // the list, most recent first
    auto list = (*store)->list_conversations(0, 1 << 20);
    if (!list.ok()) return report(list.error());
    for (const auto& c : *list) std::printf("%lld\t%s\n", static_cast<long long>(c.id), c.title.c_str());
    return 0;
  }
  auto c = (*store)->conversation(a.id);
  if (!c.ok())
    return report(make_error(ErrorCode::invalid_argument, "no conversation " + std::to_string(a.id) +
                                                              " (kvchat-cli export without an id lists them)"));
  auto text = a.format == "json" ? (*store)->export_json(a.id, c->active_leaf)
                                 : (*store)->export_markdown(a.id, c->active_leaf);
  if (!text.ok()) return report(text.error());
  if (a.output.empty()) {
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  std::ofstream out(a.output, std::ios::binary);
  out << *text;
  if (!out.flush()) return report(make_error(ErrorCode::io, "cannot write " + a.output));
  std::fprintf(stderr, "export: %s\n", a.output.c_str());
  return 0;
}

}  // namespace

void register_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", "print a saved conversation as Markdown or JSON (no id: list them)");
  cmd->add_option("id", a->id, "conversation id (see the list)")->check(CLI::PositiveNumber);
  cmd->add_option("--format", a->format, "md or json")->check(CLI::IsMember({"md", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "write to this file instead of stdout");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a] {
    if (int rc = run_export(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
