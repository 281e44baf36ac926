// Opening a link of an answer in the user's browser: xdg-open (or $KVCHAT_URL_OPENER) spawned
// directly, with the URL as its one argument; no shell ever sees the URL.
#pragma once

#include <string>
#include <string_view>

#include "core/util/result.h"

namespace kvc::ui {

// Only web and mail links open: http://, https://, mailto: (case-insensitive), no control
// characters or spaces. A relative or file: link in an answer is not opened.
bool is_openable_url(std::string_view url);

// Starts the opener and returns; the child is reaped in the background. An error says why
// (the link is not a web link, the opener could not be started).
Status open_url(const std::string& url);

}  // namespace kvc::ui
