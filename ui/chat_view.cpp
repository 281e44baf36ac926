// The Chat window: the active branch of a conversation, streaming answers, and the input box.
#include <imgui.h>

#include <algorithm>
#include <string>

#include "core/chat/chat_template.h"
#include "core/chat/context_window.h"
#include "core/chat/reasoning.h"
#include "core/util/utf8.h"
#include "ui/format.h"
#include "ui/views.h"
#include "ui/wrapped_text.h"

namespace kvc::ui {

namespace {

// The text cut (at a UTF-8 boundary) with "..." so that it fits `width` in the current font;
// reads no more of a long title than fits.
std::string fit_width(const std::string& text, float width) {
  const ImFont* font = ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  if (fit_prefix(font, size, text, width) == text.size()) return text;
  return text.substr(0, fit_prefix(font, size, text, width - ImGui::CalcTextSize("...").x)) + "...";
}

constexpr const char* k_demo_notice =
    "This is kvchat's built-in demo model. Its weights are random, so its replies are gibberish: it is here to "
    "show the engine and the KV cache at work. For real answers, open a GGUF model in the Model window (File > "
    "Open model), or pick one found in your Ollama, LM Studio or Hugging Face folders.";

std::string stats_line(const TurnStats& s) {
  const int64_t n_dec = s.n_tokens > 1 ? s.n_tokens - 1 : 0;
  std::string tiers;
  if (s.n_prompt_reused > 0) {
    tiers = " (T0 " + std::to_string(s.n_from_tier[0]) + " / T1 " + std::to_string(s.n_from_tier[1]) + " / T2 " +
            std::to_string(s.n_from_tier[2]) + ")";
  }
  return format_tok_per_s(n_dec, s.decode_ms) + "  ·  TTFT " + format_duration_ms(s.ttft_ms) +
         "  ·  prompt: " + std::to_string(s.n_prompt_reused) + " from cache" + tiers + ", " +
         std::to_string(s.n_prompt - s.n_prompt_reused) + " computed  ·  " + std::to_string(s.n_tokens) + " tokens (" +
         s.stop_reason + ")";
}

}  // namespace

// The box empties at once (the worker stores the message meanwhile); a message the worker could
// not store comes back through AppSnapshot::unsent (restore_unsent).
void ChatView::send(ViewContext& ctx) {
  const AppSnapshot& s = ctx.snap;
  if (input_.empty() || s.chat.generating || s.model.status != ModelStatus::ready || !s.storage_notice.empty()) return;
  ctx.cmd.send(input_);
  input_.clear();
  stick_to_bottom_ = true;
}

void ChatView::restore_unsent(const UnsentMessage& unsent) {
  if (unsent.serial == restored_serial_) return;
  restored_serial_ = unsent.serial;
  // Anything typed since stays, after the message that came back.
  input_ = input_.empty() ? unsent.text : unsent.text + "\n" + input_;
  if (release_text_field("##input")) focus_input = true;  // focused again, now showing input_
}

void ChatView::draw_message(ViewContext& ctx, const MessageView& m, bool last) {
  const ChatState& chat = ctx.snap.chat;
  ImGui::PushID(static_cast<int>(m.id));
  const bool user = m.role == Role::user;
  ImGui::PushFont(ctx.fonts.regular);
  ImGui::TextColored(user ? colors::user : colors::assistant, "%s",
                     user                        ? "You"
                     : m.role == Role::assistant ? "Assistant"
                                                 : "System");
  ImGui::PopFont();
  if (m.n_siblings > 1) {
    ImGui::SameLine();
    ImGui::BeginDisabled(m.prev_sibling == 0 || chat.generating);
    if (ImGui::SmallButton("<")) ctx.cmd.switch_branch(m.prev_sibling);
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::TextDisabled("%d/%d", m.sibling_index + 1, m.n_siblings);
    ImGui::SameLine();
    ImGui::BeginDisabled(m.next_sibling == 0 || chat.generating);
    const std::string next_name = "chat.branch_next." + std::to_string(m.id);
    if (named_button(ctx.hooks, next_name, ">")) ctx.cmd.switch_branch(m.next_sibling);
    ImGui::EndDisabled();
  }

  if (editing_id_ == m.id) {
    if (scroll_to_edit_) {
      ImGui::SetScrollHereY(0.25f);
      scroll_to_edit_ = false;
      stick_to_bottom_ = false;
      scrolled_elsewhere_ = true;
    }
    named_input(ctx.hooks, "chat.edit_text", "##edit", edit_text_, 0, ImVec2(-1.0f, ImGui::GetTextLineHeight() * 4.0f));
    if (named_button(ctx.hooks, "chat.edit_send", "Save & send") && !edit_text_.empty()) {
      ctx.cmd.edit_message(m.id, edit_text_);
      editing_id_ = 0;
      stick_to_bottom_ = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) editing_id_ = 0;
  } else if (m.text.empty() && m.streaming) {
    if (chat.generating && last && chat.n_prefill_tokens > 0) {
      const double elapsed = static_cast<double>(ctx.now_ms - chat.prefill_started_ms);
      ImGui::TextDisabled("%s", format_prefill(chat.n_prefill_tokens, elapsed).c_str());
    } else if (m.role == Role::assistant) {
      ImGui::TextDisabled(chat.generating && last ? "thinking..." : "(no text)");
    }
  } else if (m.role == Role::assistant) {
    const bool streaming = m.streaming && chat.generating;
    const chat::ReasoningSplit split = chat::split_reasoning(m.text, /*finished=*/!streaming);
    if (split.has_reasoning) draw_reasoning(ctx, m, split.reasoning, split.open && streaming, last);
    if (last && !split.has_reasoning) ctx.hooks.set_fact("reasoning_state", std::string("none"));
    const std::string& answer = split.answer;  // the whole text when it holds no reasoning (nor harmony channels)
    // SentencePiece replies start with the space of their first word; not worth showing.
    const size_t lead = std::min(answer.find_first_not_of(' '), answer.size());
    if (!split.has_reasoning || lead < answer.size()) {
      if (streaming && last) answers_.watch_stream(m.id);
      RenderedAnswer& a = answers_.get(m.id, lead ? answer.substr(lead) : answer, streaming);
      answers_.draw(ctx, a, m.id, last);
    }
  } else {
    // What you typed is what is shown: no Markdown; laid out once, drawn by the lines in view.
    WrappedText& t = texts_[m.id];
    t.draw(m.text);
    n_lines_drawn_ += t.n_drawn();
    if (user) ctx.hooks.set_fact("md_last_user_text", m.text);
  }

  if (m.role == Role::assistant && m.stats.valid) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(stats_line(m.stats).c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  if (m.role == Role::assistant && !m.interrupted.empty()) {
    // Killed mid-answer, or a dropped or stalled stream: the text above is what arrived before it stopped.
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(0.0f);
    std::string line = "Incomplete: " + m.interrupted;
    if (line.back() != '.') line += '.';
    line += " Regenerate it, or send a message to go on.";
    ImGui::TextUnformatted(line.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  if (editing_id_ != m.id && !(m.streaming && chat.generating)) {
    if (ImGui::SmallButton("Copy")) ImGui::SetClipboardText(m.text.c_str());
    if (m.role == Role::assistant) {
      // Select: the answer as plain text in a read-only box, to copy a part of it.
      ImGui::SameLine();
      bool& selecting = answers_.selecting(m.id);
      const std::string name = last ? "chat.select" : "chat.select." + std::to_string(m.id);
      if (named_button(ctx.hooks, name, selecting ? "Done" : "Select")) selecting = !selecting;
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("Show the answer as text you can select and copy a part of");
      if (last) ctx.hooks.set_fact("md_select_mode", selecting ? 1.0 : 0.0);
    }
    if (user && !chat.generating) {
      ImGui::SameLine();
      if (named_button(ctx.hooks, "chat.edit." + std::to_string(m.id), "Edit")) start_edit(m);
    }
    if (last && m.role == Role::assistant && !chat.generating) {
      ImGui::SameLine();
      if (named_button(ctx.hooks, "chat.regenerate", "Regenerate")) {
        ctx.cmd.regenerate();
        stick_to_bottom_ = true;
      }
    }
  }
  ImGui::PopID();
}

void ChatView::draw_reasoning(ViewContext& ctx, const MessageView& m, const std::string& reasoning, bool thinking,
                              bool last) {
  bool& open = reasoning_open_[m.id];
  std::string label = open ? "v " : "> ";
  if (thinking) {
    label += "thinking...";
  } else if (m.n_reasoning_tokens >= 0) {
    label += "Reasoning (" + std::to_string(m.n_reasoning_tokens) + " tokens)";
  } else {
    label += "Reasoning";
  }
  const std::string name = last ? "chat.reasoning" : "chat.reasoning." + std::to_string(m.id);
  ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0, 0, 0, 0));
  ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
  if (named_button(ctx.hooks, name, (label + "###" + name).c_str())) open = !open;
  ImGui::PopStyleColor(2);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip(open ? "Hide the model's reasoning" : "Show the model's reasoning");
  if (open) {
    ImGui::Indent();
    ImGui::PushStyleColor(ImGuiCol_Text, colors::muted);
    WrappedText& t = reasoning_texts_[m.id];
    t.draw(reasoning);
    n_lines_drawn_ += t.n_drawn();
    ImGui::PopStyleColor();
    ImGui::Unindent();
  }
  if (!last) return;
  // For scripts: what the last reply shows of its reasoning.
  ctx.hooks.set_fact("reasoning_state", std::string(thinking ? (open ? "thinking-expanded" : "thinking")
                                                             : (open ? "expanded" : "collapsed")));
  ctx.hooks.set_fact("reasoning_label", label.substr(2));
  ctx.hooks.set_fact("reasoning_tokens", static_cast<double>(m.n_reasoning_tokens));
  ctx.hooks.set_fact("reasoning_shown_chars", open ? static_cast<double>(reasoning.size()) : 0.0);
}

void ChatView::start_edit(const MessageView& m) {
  editing_id_ = m.id;
  edit_text_ = m.text;
  scroll_to_edit_ = true;
}

void ChatView::draw_settings(ViewContext& ctx) {
  if (ImGui::IsWindowAppearing()) {
    settings_system_ = ctx.snap.chat.system_prompt;
    settings_generation_ = ctx.snap.chat.generation;
    settings_effort_ = 1;
    for (size_t i = 0; i < std::size(chat::k_reasoning_efforts); ++i) {
      if (chat::k_reasoning_efforts[i] == ctx.snap.chat.reasoning_effort) settings_effort_ = static_cast<int>(i);
    }
  }
  ImGui::TextUnformatted("System prompt (used when the conversation starts)");
  named_input(ctx.hooks, "chat.system", "##system", settings_system_, 0,
              ImVec2(420.0f, ImGui::GetTextLineHeight() * 4.0f));
  sampling::SamplingParams& s = settings_generation_.sampling;
  ImGui::SetNextItemWidth(260.0f);
  ImGui::SliderFloat("temperature", &s.temperature, 0.0f, 2.0f, "%.2f");
  ImGui::SetNextItemWidth(260.0f);
  ImGui::SliderInt("top-k", &s.top_k, 0, 200);
  ImGui::SetNextItemWidth(260.0f);
  ImGui::SliderFloat("top-p", &s.top_p, 0.05f, 1.0f, "%.2f");
  ImGui::SetNextItemWidth(260.0f);
  ImGui::SliderFloat("min-p", &s.min_p, 0.0f, 0.5f, "%.2f");
  ImGui::SetNextItemWidth(260.0f);
  ImGui::SliderFloat("repeat penalty", &s.repeat_penalty, 1.0f, 2.0f, "%.2f");
  int max_tokens = static_cast<int>(settings_generation_.max_tokens);
  ImGui::SetNextItemWidth(260.0f);
  if (ImGui::InputInt("max tokens (-1: no limit)", &max_tokens))
    settings_generation_.max_tokens = std::max(-1, max_tokens);
  int seed = static_cast<int>(s.seed);
  ImGui::SetNextItemWidth(260.0f);
  if (ImGui::InputInt("seed (-1: random)", &seed)) s.seed = std::max(-1, seed);
  const bool effort_shown = ctx.snap.model.uses_reasoning_effort;
  if (effort_shown) {
    // gpt-oss's template reads it into its system message: low, medium (its default) or high.
    const char* efforts[] = {"low", "medium", "high"};
    ImGui::SetNextItemWidth(260.0f);
    ImGui::Combo("reasoning effort", &settings_effort_, efforts, IM_ARRAYSIZE(efforts));
    ctx.hooks.set_fact("reasoning_effort_control", std::string(efforts[settings_effort_]));
  } else {
    ctx.hooks.set_fact("reasoning_effort_control", std::string("hidden"));
  }
  if (named_button(ctx.hooks, "chat.settings_apply", "Apply")) {
    ctx.cmd.update_settings(settings_system_, settings_generation_);
    if (effort_shown) ctx.cmd.set_reasoning_effort(std::string(chat::k_reasoning_efforts[settings_effort_]));
    ImGui::CloseCurrentPopup();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
}

void ChatView::draw(ViewContext& ctx) {
  if (!ImGui::Begin(k_chat_window)) {
    ImGui::End();
    return;
  }
  ctx.hooks.note_window(k_chat_window);
  const AppSnapshot& s = ctx.snap;
  const ChatState& chat = s.chat;

  // Header: title, model, settings.
  const float settings_x = ImGui::GetWindowContentRegionMax().x - ImGui::CalcTextSize("Settings").x -
                           2.0f * ImGui::GetStyle().FramePadding.x;
  ImGui::PushFont(ctx.fonts.large);
  ImGui::TextUnformatted(fit_width(chat.conversation_id ? chat.title : "No conversation",
                                   settings_x - ImGui::GetCursorPosX() - ImGui::GetStyle().ItemSpacing.x)
                             .c_str());
  ImGui::PopFont();
  ImGui::SameLine(settings_x);
  ImGui::BeginDisabled(chat.conversation_id == 0);
  if (named_button(ctx.hooks, "chat.settings", "Settings")) ImGui::OpenPopup("Conversation settings");
  ImGui::EndDisabled();
  if (ImGui::BeginPopup("Conversation settings")) {
    draw_settings(ctx);
    ImGui::EndPopup();
  }
  // With a cut, the stream is longer than the context: say so instead of "688 tokens of 512".
  const std::string outside = kvc::chat::outside_context_note(chat.n_outside_context);
  ImGui::TextDisabled("%s  ·  %lld tokens in this conversation%s",
                      s.model.name.empty() ? "no model" : s.model.name.c_str(),
                      static_cast<long long>(chat.n_stream_tokens),
                      s.model.n_ctx ? (", context " + std::to_string(s.model.n_ctx)).c_str() : "");
  if (!outside.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted((outside + " (its view begins at the marked message; they stay saved)").c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }

  if (s.model.is_demo && s.model.status == ModelStatus::ready) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(k_demo_notice);
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  if (!s.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x - 80.0f);
    // A server's error message can be of any length: its start, drawn by the lines in view.
    constexpr size_t k_error_bytes = 2000;
    const std::string_view error = utf8_prefix(s.error, k_error_bytes);
    error_text_.draw(error.size() < s.error.size() ? std::string(error) + "..." : s.error);
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    ImGui::SameLine();
    if (ImGui::SmallButton("Dismiss")) ctx.cmd.dismiss_error();
  }
  ImGui::Separator();

  // History: variable-height messages; those scrolled out of view are replaced by their
  // measured height, so a long history costs only what is visible.
  // The storage notice, when there is one, sits above the input box and takes its height from the history.
  const float notice_h =
      s.storage_notice.empty()
          ? 0.0f
          : ImGui::CalcTextSize(s.storage_notice.c_str(), nullptr, false, ImGui::GetContentRegionAvail().x).y +
                ImGui::GetStyle().ItemSpacing.y;
  const float input_h = ImGui::GetTextLineHeight() * 4.0f + ImGui::GetStyle().ItemSpacing.y * 4.0f + 36.0f + notice_h;
  ImGui::BeginChild("##history", ImVec2(0, -input_h), false);
  // A view at the bottom of the history stays there when the history grows (an answer's stats
  // and buttons come a frame or two after its last token), unless this frame scrolls elsewhere.
  const bool at_bottom = ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 1.0f;
  scrolled_elsewhere_ = false;
  const bool changed = chat.conversation_id != shown_conversation_ || chat.messages.size() != shown_messages_;
  size_t n_chars = 0;
  for (const auto& m : chat.messages) n_chars += m.text.size();
  const bool grew = n_chars != shown_chars_;
  if (chat.conversation_id != shown_conversation_) {
    heights_.clear();
    answers_.clear();
    reasoning_open_.clear();
    texts_.clear();
    reasoning_texts_.clear();
  }
  if (changed || grew) {
    if (changed) stick_to_bottom_ = stick_to_bottom_ || chat.generating || chat.conversation_id != shown_conversation_;
    shown_conversation_ = chat.conversation_id;
    shown_messages_ = chat.messages.size();
    shown_chars_ = n_chars;
  }
  if (chat.messages.empty() && chat.conversation_id != 0) {
    ImGui::Spacing();
    ImGui::TextDisabled("Type a message below and press Ctrl+Enter to send it.");
  }
  const float view_top = ImGui::GetScrollY();
  const float view_bottom = view_top + ImGui::GetWindowHeight();
  const float width = ImGui::GetContentRegionAvail().x;
  n_lines_drawn_ = 0;
  int n_user = 0;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const MessageView& m = chat.messages[i];
    const bool last = i + 1 == chat.messages.size();
    const uint64_t key = (static_cast<uint64_t>(m.text.size()) << 20) ^ static_cast<uint64_t>(width) ^
                         (m.stats.valid ? 1u : 0u) ^ (editing_id_ == m.id ? 2u : 0u) ^
                         (chat.context_first_id == m.id ? 4u : 0u) ^ (reasoning_open_[m.id] ? 8u : 0u);
    const float y = ImGui::GetCursorPosY();
    auto it = heights_.find(m.id);
    if (m.role == Role::user) ++n_user;
    // Scripts name a question by its position too ("chat.edit_user.1": the first), on screen or not.
    const std::string by_position = "chat.edit_user." + std::to_string(n_user);
    if (m.role == Role::user && !chat.generating) {
      ctx.hooks.note_widget(by_position);
      if (ctx.hooks.take_click(by_position)) start_edit(m);
    }
    if (!last && it != heights_.end() && it->second.first == key &&
        (y + it->second.second < view_top - 200.0f || y > view_bottom + 200.0f)) {
      ImGui::Dummy(ImVec2(width, it->second.second));
      continue;
    }
    if (m.id == chat.context_first_id && chat.n_outside_context > 0) {
      // The overflow policy's cut: the model's view of the conversation begins here.
      ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
      ImGui::TextUnformatted(("- - -  " + kvc::chat::outside_context_note(chat.n_outside_context) + "  - - -").c_str());
      ImGui::PopStyleColor();
      ImGui::Separator();
    }
    draw_message(ctx, m, last);
    ImGui::Dummy(ImVec2(0, 6.0f));
    if (!last) ImGui::Separator();
    heights_[m.id] = {key, ImGui::GetCursorPosY() - y - ImGui::GetStyle().ItemSpacing.y};
  }
  if (page_scroll != 0) {
    // Most of a page, a few lines kept for context; paging up lets go of the end of an answer
    // that streams, paging down to the end follows it again (at_bottom, next frame).
    const float page = ImGui::GetWindowHeight() * 0.85f;
    ImGui::SetScrollY(
        std::clamp(ImGui::GetScrollY() + static_cast<float>(page_scroll) * page, 0.0f, ImGui::GetScrollMaxY()));
    if (page_scroll < 0) {
      stick_to_bottom_ = false;
      scrolled_elsewhere_ = true;
    }
    page_scroll = 0;
  }
  if (scroll_to_end) {
    stick_to_bottom_ = true;
    scrolled_elsewhere_ = false;
    scroll_to_end = false;
  }
  if (stick_to_bottom_ || (at_bottom && !scrolled_elsewhere_)) {
    ImGui::SetScrollHereY(1.0f);
    if (!chat.generating && !ctx.cmd.busy()) stick_to_bottom_ = false;
  } else if (!scrolled_elsewhere_ && ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4.0f && chat.generating) {
    stick_to_bottom_ = true;
  }
  ctx.hooks.set_fact("chat_scroll_gap", static_cast<double>(ImGui::GetScrollMaxY() - ImGui::GetScrollY()));
  // Lines of the user's messages and of reasoning this frame drew: those in view, whatever their length.
  ctx.hooks.set_fact("chat_lines_drawn", static_cast<double>(n_lines_drawn_));
  ImGui::EndChild();

  // Input.
  restore_unsent(s.unsent);
  if (!s.storage_notice.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::warning);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(s.storage_notice.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
  if (focus_input) {
    ImGui::SetKeyboardFocusHere();
    focus_input = false;
  }
  const float button_w = 110.0f;
  // Enter adds a line; Ctrl+Enter returns true (and leaves the field, so focus comes back).
  const bool ctrl_enter =
      named_input(ctx.hooks, "chat.input", "##input", input_, ImGuiInputTextFlags_EnterReturnsTrue,
                  ImVec2(ImGui::GetContentRegionAvail().x - button_w - ImGui::GetStyle().ItemSpacing.x,
                         ImGui::GetTextLineHeight() * 4.0f));
  ctx.hooks.set_fact("chat_input", input_);  // what the box holds (scripts: typing works while an answer streams)
  ImGui::SameLine();
  ImGui::BeginGroup();
  if (chat.generating) {
    if (named_button(ctx.hooks, "chat.stop", "Stop", ImVec2(button_w, 0))) ctx.cmd.stop();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Esc");
  } else {
    ImGui::BeginDisabled(s.model.status != ModelStatus::ready || input_.empty() || !s.storage_notice.empty());
    if (named_button(ctx.hooks, "chat.send", "Send", ImVec2(button_w, 0))) send(ctx);
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip(s.storage_notice.empty() ? "Ctrl+Enter" : "Off: nothing could be saved (see the note above)");
  }
  ImGui::EndGroup();
  if (ctrl_enter) {
    send(ctx);
    focus_input = true;
  }
  ImGui::TextDisabled(chat.generating ? "generating...  Esc stops"
                                      : "Ctrl+Enter send  ·  Ctrl+N new chat  ·  Ctrl+F search");
  ImGui::End();
}

}  // namespace kvc::ui
