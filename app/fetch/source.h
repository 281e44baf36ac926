// Where a model download comes from: a URL or a Hugging Face OWNER/REPO/FILE, the file name it
// is saved under, and the sha256 a server publishes for it in its headers.
#pragma once

#include <string>

#include "core/util/result.h"

namespace kvc::fetch {

// "https://..." / "http://..." as given; "OWNER/REPO/FILE.gguf" (or OWNER/REPO/DIR/FILE.gguf)
// as Hugging Face's https://huggingface.co/OWNER/REPO/resolve/main/FILE.gguf. Anything else
// is an invalid_argument error saying what is accepted.
Result<std::string> resolve_source(const std::string& source);

// The file name a URL's path ends in, percent-decoded; an error when it is empty, is "." or
// "..", or holds a '/', a '\\' or a control character.
Result<std::string> file_name_from_url(const std::string& url);

// A name to save a download under in the models folder: not empty, ".", ".." or hidden, no '/',
// '\\' or control character. The error names --output.
Status check_file_name(const std::string& name);

// The sha256 an ETag-like header value holds (Hugging Face's X-Linked-Etag for its LFS files,
// '"1a2b..."'): 64 hex digits once W/ and quotes are stripped, returned lowercase; else empty.
std::string sha256_from_etag(const std::string& value);

}  // namespace kvc::fetch
