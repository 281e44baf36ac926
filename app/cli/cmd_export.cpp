// kvchat-cli export: a saved conversation's active branch as Markdown or JSON (or the list of them).
//
// It only reads: kvchat.db is opened read-only, never created, migrated or moved aside. A
// damaged file is read around its damage and stderr says what was found; the exit status is
// non-zero whenever the answer is incomplete (part of the list, or of the conversation, could
// not be read).
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

int write_out(const ExportArgs& a, const std::string& text) {
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream out(a.output, std::ios::binary);
  out << text;
  if (!out.flush()) return report(make_error(ErrorCode::io, "cannot write " + a.output));
  std::fprintf(stderr, "export: %s\n", a.output.c_str());
  return 0;
}

std::string render(const ExportArgs& a, const storage::Conversation& c, const std::vector<storage::Message>& path) {
  return a.format == "json" ? storage::export_json(c, path) : storage::export_markdown(c, path);
}

// The list, or one conversation, from a database that failed quick_check (`damage` says how).
int export_damaged(const ExportArgs& a, storage::ConversationStore& store, const std::string& damage) {
  std::fprintf(stderr,
               "kvchat-cli: %s. It is only read here, and left as it is (the kvchat app moves a damaged kvchat.db "
               "aside and starts a new one).\n",
               damage.c_str());
  if (a.id == 0) {
    const auto found = store.readable_conversations();
    for (const auto& c : found.rows) std::printf("%lld\t%s\n", static_cast<long long>(c.id), c.title.c_str());
    std::fprintf(stderr, "kvchat-cli: %zu conversation%s readable (listed), %s.\n", found.rows.size(),
                 found.rows.size() == 1 ? "" : "s",
                 found.complete ? "the whole list" : "part of the list cannot be read: it lies on damaged pages");
    return found.complete ? 0 : 3;
  }
  const std::string which = "conversation " + std::to_string(a.id);
  auto c = store.conversation(a.id);
  if (!c.ok()) {
    if (c.error().code == ErrorCode::invalid_argument) {  // read, and not there
      return report(make_error(ErrorCode::invalid_argument,
                               "no " + which + " (kvchat-cli export without an id lists those readable)"));
    }
    return report(make_error(ErrorCode::invalid_file, which + " cannot be read: it lies on damaged pages"));
  }
  storage::Salvaged<storage::Message> path;
  if (c->active_leaf != 0) path = store.readable_path(c->active_leaf);
  const int rc = write_out(a, render(a, *c, path.rows));
  if (rc != 0) return rc;
  if (path.complete) {
    std::fprintf(stderr, "kvchat-cli: %s was read whole (%zu messages).\n", which.c_str(), path.rows.size());
    return 0;
  }
  if (path.rows.empty()) {
    std::fprintf(stderr, "kvchat-cli: %s is only partly readable: its title and settings, none of its messages.\n",
                 which.c_str());
  } else {
    std::fprintf(stderr,
                 "kvchat-cli: %s is only partly readable: its last %zu message%s exported, the earlier ones lie on "
                 "damaged pages.\n",
                 which.c_str(), path.rows.size(), path.rows.size() == 1 ? "" : "s");
  }
  return 3;
}

int run_export(const ExportArgs& a) {
  const auto dir = storage::resolve_data_dir(a.data_dir);
  if (!std::filesystem::exists(dir / "kvchat.db")) {
    return report(
        make_error(ErrorCode::invalid_argument, "no conversations in " + dir.string() + " (kvchat.db is missing)"));
  }
  auto store = storage::ConversationStore::open_read_only(dir / "kvchat.db");
  if (!store.ok()) {
    std::string why = store.error().message;
    if (store.error().code == ErrorCode::invalid_file) why += "; nothing can be read from it. It was left as it is";
    return report(make_error(store.error().code, why));
  }
  if (!(*store)->notice().empty()) std::fprintf(stderr, "kvchat-cli: %s\n", (*store)->notice().c_str());
  if (Status health = (*store)->verify(); !health.ok()) return export_damaged(a, **store, health.error().message);
  if (a.id == 0) {  // the list, most recent first
    auto list = (*store)->list_conversations(0, 1 << 20);
    if (!list.ok()) return report(list.error());
    for (const auto& c : *list) std::printf("%lld\t%s\n", static_cast<long long>(c.id), c.title.c_str());
    return 0;
  }
  auto c = (*store)->conversation(a.id);
  if (!c.ok()) {
    if (c.error().code != ErrorCode::invalid_argument) return report(c.error());
    return report(make_error(ErrorCode::invalid_argument, "no conversation " + std::to_string(a.id) +
                                                              " (kvchat-cli export without an id lists them)"));
  }
  auto text = a.format == "json" ? (*store)->export_json(a.id, c->active_leaf)
                                 : (*store)->export_markdown(a.id, c->active_leaf);
  if (!text.ok()) return report(text.error());
  return write_out(a, *text);
}

}  // namespace

void register_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand(
      "export",
      "print a saved conversation as Markdown or JSON (no id: list them); reads kvchat.db only, and from a damaged "
      "one exports what can be read and says what it found (exit 3 when part of the answer cannot be read)");
  cmd->add_option("id", a->id, "conversation id (see the list)")->check(CLI::PositiveNumber);
  cmd->add_option("--format", a->format, "md or json")->check(CLI::IsMember({"md", "json"}))->capture_default_str();
  cmd->add_option("-o,--output", a->output, "write to this file instead of stdout");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a] {
    if (int rc = run_export(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli
