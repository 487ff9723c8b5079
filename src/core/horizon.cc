#include "flurry/horizon.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <vector>

namespace flurry {
namespace {

constexpr std::string_view kMagic = "flurry-horizon 1";
constexpr std::size_t kMaxFileSize = 64 * 1024;

// FNV-1a: detects a torn or edited file; not a security measure.
std::uint64_t checksum(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Status io_error(const std::string& what, const std::filesystem::path& path, int err) {
  return Status(StatusCode::kUnavailable, Reason::kIo,
                what + " " + path.string() + ": " + std::strerror(err));
}

Status corrupt(std::string what) {
  return Status(StatusCode::kDataLoss, Reason::kStateMismatch,
                "horizon record is corrupt: " + std::move(what));
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

Status write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return OkStatus();
}

}  // namespace

std::string format_horizon_record(const HorizonRecord& record) {
  std::string body;
  body += kMagic;
  body += "\nlayout " + record.layout;
  body += "\nnode " + std::to_string(record.node);
  body += "\ngeneration " + std::to_string(record.generation);
  body += "\nhorizons";
  for (std::int64_t h : record.horizons) {
    body += ' ';
    body += std::to_string(h);
  }
  body += "\n";
  return body + "check " + std::to_string(checksum(body)) + "\n";
}

Result<HorizonRecord> parse_horizon_record(std::string_view text) {
  const std::size_t check_pos = text.rfind("check ");
  if (check_pos == std::string_view::npos || (check_pos != 0 && text[check_pos - 1] != '\n')) {
    return corrupt("no check line (the file may be truncated)");
  }
  const std::string_view body = text.substr(0, check_pos);
  std::string_view check_line = text.substr(check_pos + 6);
  if (check_line.empty() || check_line.back() != '\n') return corrupt("check line is truncated");
  check_line.remove_suffix(1);
  std::uint64_t expected = 0;
  if (!parse_number(check_line, expected) || expected != checksum(body)) {
    return corrupt("checksum does not match the content");
  }

  // The body is exactly five lines in a fixed order; anything else is rejected.
  std::vector<std::string_view> lines;
  for (std::string_view rest = body; !rest.empty();) {
    const std::size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return corrupt("the last line is not terminated");
    lines.push_back(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  constexpr std::string_view kKeys[] = {"layout ", "node ", "generation ", "horizons "};
  if (lines.size() != 5) {
    return corrupt("expected 5 lines before the check line, found " + std::to_string(lines.size()));
  }
  if (lines[0] != kMagic) return corrupt("line 1 is not \"" + std::string(kMagic) + "\"");
  std::string_view values[4];
  for (std::size_t i = 0; i < 4; ++i) {
    if (!lines[i + 1].starts_with(kKeys[i])) {
      return corrupt("line " + std::to_string(i + 2) + " should start with \"" +
                     std::string(kKeys[i]) + "\"");
    }
    values[i] = lines[i + 1].substr(kKeys[i].size());
  }
  HorizonRecord record;
  record.layout = std::string(values[0]);
  if (record.layout.empty()) return corrupt("line 2 has an empty layout");
  if (!parse_number(values[1], record.node)) return corrupt("line 3 has a bad node number");
  if (!parse_number(values[2], record.generation)) {
    return corrupt("line 4 has a bad generation number");
  }
  for (std::string_view r = values[3];;) {
    const std::size_t sp = r.find(' ');
    std::int64_t h = 0;
    if (!parse_number(r.substr(0, sp), h) || h < -1) return corrupt("line 5 has a bad horizon");
    record.horizons.push_back(h);
    if (sp == std::string_view::npos) break;
    r.remove_prefix(sp + 1);
  }
  if (record.generation >= record.horizons.size()) {
    return corrupt("generation " + std::to_string(record.generation) + " has no horizon");
  }
  // Leading zeros, signs and the like parse but are not what format_horizon_record writes.
  if (format_horizon_record(record) != text) return corrupt("the text is not in canonical form");
  return record;
}

FileHorizonStore::FileHorizonStore(std::filesystem::path file) : file_(std::move(file)) {}

std::filesystem::path FileHorizonStore::path_for(const std::filesystem::path& state_dir,
                                                 std::uint64_t node) {
  return state_dir / ("horizon-node-" + std::to_string(node) + ".state");
}

Result<HorizonRecord> FileHorizonStore::load() {
  std::error_code ec;
  if (!std::filesystem::exists(file_, ec)) {
    if (ec) return io_error("cannot look for", file_, ec.value());
    return Status(StatusCode::kNotFound, Reason::kNone, "no horizon file " + file_.string());
  }
  std::ifstream in(file_, std::ios::binary);
  if (!in) return io_error("cannot open", file_, errno);
  std::string text(kMaxFileSize + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileSize) {
    return Status(StatusCode::kDataLoss, Reason::kStateMismatch,
                  "horizon file " + file_.string() + " is larger than any flurry writes");
  }
  Result<HorizonRecord> record = parse_horizon_record(text);
  if (!record.ok()) return record.status().with_prefix(file_.string());
  return record;
}

Status FileHorizonStore::save(const HorizonRecord& record) {
  const std::filesystem::path dir = file_.has_parent_path() ? file_.parent_path() : ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create directory", dir, ec.value());

  const std::filesystem::path tmp = file_.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", tmp, errno);
  Status st = write_all(fd, format_horizon_record(record), tmp);
  if (st.ok() && ::fsync(fd) != 0) st = io_error("cannot fsync", tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = io_error("cannot close", tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), file_.c_str()) != 0) {
    st = io_error("cannot rename over", file_, errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // The rename is durable only once the directory entry is.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_error("cannot open directory", dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return io_error("cannot fsync directory", dir, err);
  return OkStatus();
}

}  // namespace flurry
