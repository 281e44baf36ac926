// The Model window's Download tab: the curated models, a URL field, progress and cancel.
#include <imgui.h>

#include "ui/format.h"
#include "ui/views.h"

namespace kvc::ui {

void ModelView::draw_download(ViewContext& ctx) {
  const DownloadState& d = ctx.snap.download;
  const bool running = d.status == DownloadStatus::running;
  if (!d.catalog_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::error);
    ImGui::TextWrapped("%s", d.catalog_error.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::BeginChild("##offers", ImVec2(0, 150.0f), true);
  for (size_t i = 0; i < d.offers.size(); ++i) {
    const DownloadOffer& o = d.offers[i];
    ImGui::PushID(static_cast<int>(i));
    ImGui::BeginDisabled(running);
    if (named_button(ctx.hooks, "model.offer." + std::to_string(i), "Download")) ctx.cmd.start_download(o.source);
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::TextUnformatted(o.name.c_str());
    if (ImGui::IsItemHovered()) {
      const std::string tip = o.source + (o.needs.empty() ? std::string() : "\nneeds " + o.needs);
      ImGui::SetTooltip("%s", tip.c_str());
    }
    ImGui::Indent();
    const std::string about = "about " + format_bytes(static_cast<double>(o.size_bytes)) + ", " + o.licence +
                              (o.notes.empty() ? std::string() : "; " + o.notes);
    text_disabled_wrapped(about.c_str());
    ImGui::Unindent();
    ImGui::PopID();
  }
  ImGui::EndChild();
  ImGui::SetNextItemWidth(-90.0f);
  const bool enter =
      named_input(ctx.hooks, "model.download_url", "##url", download_url_, ImGuiInputTextFlags_EnterReturnsTrue,
                  ImVec2(0, 0), "https://... or OWNER/REPO/FILE.gguf");
  ImGui::SameLine();
  ImGui::BeginDisabled(running || download_url_.empty());
  if (named_button(ctx.hooks, "model.download", "Download") || (enter && !running && !download_url_.empty())) {
    ctx.cmd.start_download(download_url_);
  }
  ImGui::EndDisabled();
  switch (d.status) {
    case DownloadStatus::idle:
      text_disabled_wrapped("Into the data directory's models folder; an interrupted download resumes.");
      break;
    case DownloadStatus::running: {
      const float f = d.total_bytes
                          ? static_cast<float>(static_cast<double>(d.done_bytes) / static_cast<double>(d.total_bytes))
                          : 0.0f;
      ImGui::ProgressBar(f, ImVec2(-90.0f, 0), d.progress_text.c_str());
      ImGui::SameLine();
      if (named_button(ctx.hooks, "model.download_cancel", "Cancel")) ctx.cmd.cancel_download();
      text_disabled_wrapped(d.source.c_str());
      break;
    }
    case DownloadStatus::done:
      ImGui::TextWrapped("Downloaded %s (%s): listed under On this machine and selected below.", d.path.c_str(),
                         d.progress_text.c_str());
      text_disabled_wrapped(("sha256 " + d.sha256 + ", " + d.note).c_str());
      break;
    case DownloadStatus::failed:
    case DownloadStatus::cancelled:
      ImGui::PushStyleColor(ImGuiCol_Text, d.status == DownloadStatus::failed ? colors::error : colors::warning);
      ImGui::TextWrapped("%s", d.error.c_str());
      ImGui::PopStyleColor();
      break;
  }
}

}  // namespace kvc::ui
