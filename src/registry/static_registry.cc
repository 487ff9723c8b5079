// The static node registry: a node ID fixed by configuration (or a StatefulSet pod ordinal), its
// horizon in a local state file, and an flock on "<state file>.lock" so that two processes on
// one host cannot run as the same node.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "core/durable_file.h"
#include "core/numbers.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"

namespace flurry {
namespace {

namespace fs = std::filesystem;

class StaticRegistry final : public NodeRegistry {
 public:
  StaticRegistry(fs::path state_dir, std::uint64_t node)
      : dir_(std::move(state_dir)),
        node_(node),
        file_(FileHorizonStore::path_for(dir_, node)),
        lock_path_(file_.string() + ".lock"),
        token_path_(file_.string() + ".token"),
        store_(file_) {}

  ~StaticRegistry() override {
    if (fd_ >= 0) ::close(fd_);  // drops the lock
  }
  StaticRegistry(const StaticRegistry&) = delete;
  StaticRegistry& operator=(const StaticRegistry&) = delete;

  Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override;
  Status renew(const Lease& lease) override;
  Status save_horizon(const Lease& lease, const HorizonRecord& record) override;
  Status release(const Lease& lease) override;
  Result<RegistryListing> list() override;
  Status release_node(std::uint64_t node, bool force) override;
  std::string describe() const override { return "static:" + file_.string(); }

 private:
  // OK when `lease` is the one this registry handed out and still holds. Requires mu_.
  [[nodiscard]] Status check_held(const Lease& lease) const FLURRY_REQUIRES(mu_);
  // Who holds the lock file, as its holder wrote it there (best effort, for messages).
  [[nodiscard]] std::string holder_of(int fd) const;
  // The owner written in the lock file while a process holds the lock; nullopt when nobody
  // does. Requires mu_.
  [[nodiscard]] Result<std::optional<std::string>> current_holder() const FLURRY_REQUIRES(mu_);
  // The last fencing token given for this node (0: never claimed).
  [[nodiscard]] Result<std::uint64_t> last_token() const;
  // The fencing token of a new claim: one above the last one given for this node by any process
  // (kept durably in token_path_), so it strictly increases however the node is claimed. Call
  // with the lock file locked (and mu_ held).
  [[nodiscard]] Result<std::uint64_t> next_token() FLURRY_REQUIRES(mu_);

  const fs::path dir_;
  const std::uint64_t node_;
  const fs::path file_;
  const std::string lock_path_;
  const fs::path token_path_;

  Mutex mu_;
  FileHorizonStore store_ FLURRY_GUARDED_BY(mu_);
  int fd_ FLURRY_GUARDED_BY(mu_) = -1;  // the locked lock file while claimed
  // Of the current (or last) claim through this object.
  std::uint64_t token_ FLURRY_GUARDED_BY(mu_) = 0;
};

std::string StaticRegistry::holder_of(int fd) const {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return {};
  std::string_view text(buf, static_cast<std::size_t>(n));
  text = text.substr(0, text.find('\n'));
  return text.empty() ? std::string() : "held by " + internal::quote(text) + ", ";
}

Result<std::uint64_t> StaticRegistry::last_token() const {
  Result<std::string> text = internal::read_small_file(token_path_, 64);
  if (!text.ok()) {
    return text.status().code() == StatusCode::kNotFound ? Result<std::uint64_t>(std::uint64_t{0})
                                                         : Result<std::uint64_t>(text.status());
  }
  // Never read an unreadable token as 0: a stale owner's token could come round again.
  std::string_view digits(*text);
  if (!digits.empty() && digits.back() == '\n') digits.remove_suffix(1);
  const internal::ParsedUint parsed = internal::parse_uint(digits);
  if (!parsed.ok() || parsed.value == std::numeric_limits<std::uint64_t>::max()) {
    return Status(Reason::kCorrupt, "the fencing token file " + token_path_.string() + " holds " +
                                        internal::quote(*text) +
                                        ", not a token; remove it only if no process uses node " +
                                        std::to_string(node_));
  }
  return parsed.value;
}

Result<std::uint64_t> StaticRegistry::next_token() {
  Result<std::uint64_t> last = last_token();
  if (!last.ok()) return last.status();
  const std::uint64_t token = std::max(*last, token_) + 1;
  if (Status st = internal::write_file_durably(token_path_, std::to_string(token) + "\n");
      !st.ok()) {
    return st;
  }
  return token;
}

Result<std::optional<std::string>> StaticRegistry::current_holder() const {
  const int fd = ::open(lock_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return internal::open_error(lock_path_, errno).with_prefix("lock file");
  }
  // Locks from open file descriptions conflict even within one process, so this also sees the
  // lock this object holds.
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_SH | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  std::optional<std::string> holder;
  if (rc != 0 && err == EWOULDBLOCK) {
    char buf[256];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    std::string_view text(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    holder = std::string(text.substr(0, text.find('\n')));
  }
  ::close(fd);  // drops the shared lock, if taken
  if (rc != 0 && err != EWOULDBLOCK) return internal::io_error("cannot lock", lock_path_, err);
  return holder;
}

Result<RegistryListing> StaticRegistry::list() {
  MutexLock lock(mu_);
  RegistryListing listing;
  if (Result<std::string> layout = internal::read_small_file(dir_ / "layout", 4096); layout.ok()) {
    listing.layout = *layout;
    if (listing.layout.ends_with('\n')) listing.layout.pop_back();
  } else if (layout.status().code() != StatusCode::kNotFound) {
    return layout.status();
  }
  Result<std::uint64_t> token = last_token();
  if (!token.ok()) return token.status();
  Result<std::optional<std::string>> holder = current_holder();
  if (!holder.ok()) return holder.status();
  NodeInfo info;
  info.node = node_;
  info.token = *token;
  info.live = holder->has_value();
  info.owner = holder->value_or("");
  Result<HorizonRecord> record = store_.load();
  if (record.ok()) {
    info.horizon = std::move(record).value();
  } else if (record.status().code() != StatusCode::kNotFound) {
    info.horizon_error = record.status().message();
  }
  if (info.token > 0 || info.live || info.horizon || !info.horizon_error.empty()) {
    listing.nodes.push_back(std::move(info));
  }
  return listing;
}

Status StaticRegistry::release_node(std::uint64_t node, bool force) {
  MutexLock lock(mu_);
  if (node != node_) {
    return Status(StatusCode::kNotFound, describe() + " keeps node " + std::to_string(node_) +
                                             " only, not node " + std::to_string(node));
  }
  Result<std::optional<std::string>> holder = current_holder();
  if (!holder.ok()) return holder.status();
  if (!holder->has_value()) return OkStatus();  // free already: a static node has no lease row
  return Status(Reason::kLeaseLive,
                "node " + std::to_string(node) + " is held by " + internal::quote(**holder) +
                    ", whose lease is the lock on " + lock_path_ +
                    (force ? ": a static node cannot be released by force; stop that process"
                           : "; stop that process to free it"));
}

Result<Claim> StaticRegistry::claim(std::string_view owner, std::uint64_t node_count) {
  if (node_count == 0) return InvalidArgument("node_count must be at least 1");
  if (node_ >= node_count) {
    return InvalidArgument("node " + std::to_string(node_) +
                           " is out of range: the layout has node IDs 0-" +
                           std::to_string(node_count - 1));
  }
  MutexLock lock(mu_);
  if (fd_ >= 0) {
    return Status(Reason::kNoFreeNode, "node " + std::to_string(node_) +
                                           " is already claimed through this registry (lock file " +
                                           lock_path_ + "); release it first");
  }
  if (Status st = internal::create_private_dirs(dir_); !st.ok()) return st;
  Result<int> opened = internal::open_private_file(lock_path_, O_RDWR | O_CREAT);
  if (!opened.ok()) return opened.status().with_prefix("lock file");
  const int fd = *opened;
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      std::string holder = holder_of(fd);
      ::close(fd);
      return Status(Reason::kNoFreeNode,
                    "node " + std::to_string(node_) +
                        " is already in use by another process on this host (" + holder +
                        "lock file " + lock_path_ + ")");
    }
    ::close(fd);
    return internal::io_error("cannot lock", lock_path_, err);
  }
  // Say who holds the lock, for the next process's message; failing to is harmless.
  const std::string note = std::string(owner) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, note.data(), note.size(), 0);

  Result<HorizonRecord> record = store_.load();
  std::optional<HorizonRecord> inherited;
  if (record.ok()) {
    inherited = std::move(record).value();
  } else if (record.status().code() != StatusCode::kNotFound) {
    ::close(fd);
    return record.status();
  }
  Result<std::uint64_t> token = next_token();
  if (!token.ok()) {
    ::close(fd);
    return token.status();
  }
  fd_ = fd;
  token_ = *token;

  Claim claim;
  claim.lease.node = node_;
  claim.lease.token = token_;
  claim.lease.owner = std::string(owner);
  claim.lease.ttl = std::chrono::milliseconds(0);  // never expires
  claim.inherited = std::move(inherited);
  return claim;
}

Status StaticRegistry::check_held(const Lease& lease) const {
  if (fd_ >= 0 && lease.node == node_ && lease.token == token_) return OkStatus();
  return Status(Reason::kLeaseLost, "node " + std::to_string(lease.node) + " (token " +
                                        std::to_string(lease.token) + ") is not claimed through " +
                                        describe() + (fd_ >= 0 ? "" : " (it was released)"));
}

Status StaticRegistry::renew(const Lease& lease) {
  MutexLock lock(mu_);
  return check_held(lease);
}

Status StaticRegistry::save_horizon(const Lease& lease, const HorizonRecord& record) {
  MutexLock lock(mu_);
  if (Status st = check_held(lease); !st.ok()) return st;
  if (record.node != node_) {
    return InvalidArgument("a horizon record for node " + std::to_string(record.node) +
                           " cannot be saved as node " + std::to_string(node_) + "'s");
  }
  return store_.save(record);
}

Status StaticRegistry::release(const Lease& lease) {
  MutexLock lock(mu_);
  if (Status st = check_held(lease); !st.ok()) return st;
  // The lock file stays: removing it would let two processes lock two different files.
  ::close(fd_);
  fd_ = -1;
  return OkStatus();
}

Status other_layout(const fs::path& dir, std::string_view theirs, std::string_view ours,
                    std::string_view detail) {
  return Status(Reason::kStateMismatch,
                "the state directory " + dir.string() + " belongs to layout \"" +
                    std::string(theirs) + "\"" + std::string(detail) +
                    "; this process uses layout \"" + std::string(ours) +
                    "\". IDs of two layouts over the same node IDs collide even when their node "
                    "IDs differ: give the other layout its own state directory");
}

// A state directory belongs to one layout, recorded in DIR/layout by the first process that
// uses it (created atomically with link(), so two first processes cannot both win). A directory
// from before layouts were recorded is checked against its horizon files first.
Status check_layout(const fs::path& dir, std::string_view layout) {
  const fs::path file = dir / "layout";
  const std::string content = std::string(layout) + "\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<std::string> recorded = internal::read_small_file(file, 4096);
    if (recorded.ok()) {
      if (*recorded == content) return OkStatus();
      std::string_view theirs = *recorded;
      if (theirs.ends_with('\n')) theirs.remove_suffix(1);
      if (Layout::same_structure(theirs, layout)) return OkStatus();  // names are labels
      return other_layout(dir, theirs, layout, " (as " + file.string() + " says)");
    }
    if (recorded.status().code() != StatusCode::kNotFound) return recorded.status();
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with("horizon-node-") || !name.ends_with(".state")) continue;
      Result<HorizonRecord> r = FileHorizonStore(it->path()).load();
      if (r.ok() && !Layout::same_structure(r->layout, layout)) {
        return other_layout(dir, r->layout, layout, " (as " + it->path().string() + " says)");
      }
    }
    const fs::path fresh = dir / ("layout.new-" + std::to_string(::getpid()));
    if (Status st = internal::write_file_durably(fresh, content); !st.ok()) return st;
    const int rc = ::link(fresh.c_str(), file.c_str());
    const int err = errno;
    ::unlink(fresh.c_str());
    if (rc == 0) return OkStatus();
    if (err != EEXIST) return internal::io_error("cannot create", file, err);
    // Another process recorded a layout first: compare with it.
  }
  return internal::io_error("cannot record the layout in", file, EEXIST);
}

}  // namespace

Result<std::unique_ptr<NodeRegistry>> open_static_registry(const std::string& state_dir,
                                                           std::uint64_t node,
                                                           std::string_view layout) {
  if (state_dir.empty()) return InvalidArgument("the static registry needs a state directory");
  // A directory is either a sqlite registry's or static nodes'. Static node N here would not see
  // the horizon the sqlite registry keeps for node N, and could repeat its IDs.
  const std::filesystem::path db = std::filesystem::path(state_dir) / "registry.db";
  std::error_code ec;
  if (std::filesystem::exists(db, ec)) {
    return Status(Reason::kStateMismatch,
                  "the directory " + internal::quote(state_dir) +
                      " holds a sqlite node registry (registry.db), whose node IDs a static node "
                      "here could repeat without their horizons; use another directory");
  }
  if (Status st = internal::create_private_dirs(state_dir); !st.ok()) return st;
  if (Status st = internal::check_writable_dir(state_dir); !st.ok()) {
    return st.with_prefix("the static registry cannot keep its state in " + state_dir);
  }
  if (Status st = check_layout(state_dir, layout); !st.ok()) return st;
  return std::unique_ptr<NodeRegistry>(std::make_unique<StaticRegistry>(state_dir, node));
}

Result<std::uint64_t> node_from_hostname(std::string_view hostname) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("cannot take a node ID from hostname " + internal::quote(hostname) +
                           ": " + std::string(why));
  };
  const std::size_t dash = hostname.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == hostname.size()) {
    return bad("it does not end in \"-<ordinal>\" like a StatefulSet pod name (\"flurry-0\")");
  }
  const internal::ParsedUint node = internal::parse_uint(hostname.substr(dash + 1));
  if (node.error == internal::UintError::kTooLarge) return bad("the ordinal is too large");
  if (!node.ok()) {
    return bad("it does not end in \"-<ordinal>\" like a StatefulSet pod name (\"flurry-0\")");
  }
  return node.value;
}

}  // namespace flurry
