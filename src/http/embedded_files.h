// Internal: static files embedded into the binary at build time (the console's page, script and
// style sheet). flurry_embed_files() in src/http/CMakeLists.txt generates the definition of
// embedded_files() from the files it lists; nothing is read from disk at run time.
#pragma once

#include <span>
#include <string_view>

namespace flurry::http {

struct EmbeddedFile {
  std::string_view path;          // relative to src/http/: "console/index.html"
  std::string_view content_type;  // from the extension: "text/html; charset=utf-8"
  std::string_view bytes;         // the file as it was at build time
};

// Every embedded file, in the order CMakeLists.txt lists them. Static storage; thread-safe.
[[nodiscard]] std::span<const EmbeddedFile> embedded_files() noexcept;

// The file with `path`, or nullptr.
[[nodiscard]] inline const EmbeddedFile* find_embedded_file(std::string_view path) noexcept {
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path == path) return &file;
  }
  return nullptr;
}

}  // namespace flurry::http
