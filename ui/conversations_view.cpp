// The Conversations window: new, search, open, rename, delete.
#include <imgui.h>

#include "ui/format.h"
#include "ui/views.h"

namespace kvc::ui {

void ConversationsView::draw(ViewContext& ctx) {
  if (!ImGui::Begin(k_conversations_window)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_conversations_window);
  const float w = ImGui::GetContentRegionAvail().x;
  if (named_button(ctx.hooks, "conv.new", "+  New chat", ImVec2(w, 0))) ctx.cmd.new_conversation();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Ctrl+N");
  if (focus_search) {
    ImGui::SetKeyboardFocusHere();
    focus_search = false;
  }
  ImGui::SetNextItemWidth(w);
  named_input(ctx.hooks, "conv.search", "##search", query_, 0, ImVec2(0, 0), "Search (Ctrl+F)");
  if (query_ != sent_query_) {
    sent_query_ = query_;
    ctx.cmd.search(query_);
  }
  ImGui::Separator();

  const AppSnapshot& s = ctx.snap;
  const bool searching = !query_.empty();
  const std::vector<ConversationSummary>& rows = searching ? s.search_results : s.conversations;
  if (searching && rows.empty() && s.search_query == query_) ImGui::TextDisabled("No matches.");

  ImGui::BeginChild("##list");
  const float row_h = ImGui::GetTextLineHeightWithSpacing() * 2.0f + 4.0f;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(rows.size()), row_h);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const ConversationSummary& c = rows[static_cast<size_t>(i)];
      ImGui::PushID(static_cast<int>(c.id));
      const bool current = c.id == s.chat.conversation_id;
      const ImVec2 start = ImGui::GetCursorPos();
      if (ImGui::Selectable("##row", current, ImGuiSelectableFlags_AllowItemOverlap, ImVec2(0, row_h - 4.0f))) {
        ctx.cmd.open_conversation(c.id);
      }
      ctx.hooks.note_widget("conv.item." + std::to_string(i));
      if (ctx.hooks.take_click("conv.item." + std::to_string(i))) ctx.cmd.open_conversation(c.id);
      if (ImGui::BeginPopupContextItem("##ctx")) {
        if (ImGui::MenuItem("Rename")) {
          rename_id_ = c.id;
          rename_text_ = c.title;
        }
        if (ImGui::MenuItem("Export as Markdown")) ctx.cmd.export_conversation(c.id, true);
        if (ImGui::MenuItem("Export as JSON")) ctx.cmd.export_conversation(c.id, false);
        if (ImGui::MenuItem("Delete")) delete_id_ = c.id;
        ImGui::EndPopup();
      }
      ImGui::SetCursorPos(ImVec2(start.x + 6.0f, start.y + 2.0f));
      const float text_w = ImGui::GetContentRegionAvail().x - 6.0f;
      ImGui::TextUnformatted(ellipsize(c.title, text_w).c_str());
      ImGui::SetCursorPos(ImVec2(start.x + 6.0f, start.y + 2.0f + ImGui::GetTextLineHeightWithSpacing()));
      if (searching && !c.snippet.empty()) {
        ImGui::TextDisabled("%s", ellipsize(c.snippet, text_w).c_str());
      } else {
        ImGui::TextDisabled("%s", format_age(c.updated_ms, ctx.now_ms).c_str());
      }
      ImGui::SetCursorPos(ImVec2(start.x, start.y + row_h));
      ImGui::PopID();
    }
  }
  ImGui::EndChild();

  // Rename and delete dialogs.
  if (rename_id_ != 0) ImGui::OpenPopup("Rename conversation");
  if (ImGui::BeginPopupModal("Rename conversation", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::SetNextItemWidth(360.0f);
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    const bool enter = input_string("##title", rename_text_, ImGuiInputTextFlags_EnterReturnsTrue);
    if (ImGui::Button("Rename") || enter) {
      if (!rename_text_.empty()) ctx.cmd.rename_conversation(rename_id_, rename_text_);
      rename_id_ = 0;
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
      rename_id_ = 0;
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }
  if (delete_id_ != 0) ImGui::OpenPopup("Delete conversation?");
  if (ImGui::BeginPopupModal("Delete conversation?", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::TextUnformatted("The conversation and all its branches will be deleted.");
    if (ImGui::Button("Delete")) {
      ctx.cmd.delete_conversation(delete_id_);
      delete_id_ = 0;
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
      delete_id_ = 0;
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }
  ImGui::End();
}

}  // namespace kvc::ui
