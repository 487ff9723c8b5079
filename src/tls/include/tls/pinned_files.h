// Internal: a server's TLS files as last checked, kept in memory under fixed paths, for a reader
// that re-reads files by their path on its own schedule: gRPC's FileWatcherCertificateProvider
// reads its files every kGrpcTlsRefresh and serves whatever it finds, a certificate that does not
// parse included, after which no handshake completes. Pointed at these paths instead, it only
// ever finds a pair that loaded, and a new one only once SIGHUP checked it (as HTTP's
// ServerContext::reload, which keeps the old pair when the new one does not load).
#pragma once

#include <string>

#include "flurry/mutex.h"
#include "flurry/status.h"
#include "server.h"

namespace flurry::tls {

// Thread-safe. The contents live in anonymous memory files (memfd_create, mode 0600), named by
// /proc/self/fd/N: the chain and its key in one file (one switch replaces both, so no reader sees
// a key with another certificate), the client CAs in another. Nothing is written to disk.
class PinnedServerFiles {
 public:
  PinnedServerFiles() = default;
  PinnedServerFiles(const PinnedServerFiles&) = delete;
  PinnedServerFiles& operator=(const PinnedServerFiles&) = delete;
  ~PinnedServerFiles();

  // Reads `files` and checks them as make_server_context does (its FAILED_PRECONDITION messages,
  // naming the file and the cause), then makes copies of what was read, checks the copies again
  // (files replaced while they were read are refused) and only then switches paths() to them, in
  // one step per file. On any error the previous contents stay. UNAVAILABLE / IO when a memory
  // file cannot be made.
  [[nodiscard]] Status pin(const ServerFiles& files);

  // pin(files) again when one of them changed (device, inode, size or modification time, links
  // followed) since the last pin() or refresh() looked: true when new contents were pinned, false
  // when nothing changed, pin()'s error when they changed but do not load (once: files that stay
  // as they are are not tried again). Costs a stat() per file when nothing changed.
  [[nodiscard]] Result<bool> refresh(const ServerFiles& files);

  // Where the pinned files are read: cert_file and key_file are the same file (the chain, then
  // the key); client_ca_file when the last pin() had one. Empty paths before the first pin().
  // The paths stay the same across pins.
  [[nodiscard]] ServerFiles paths() const;

 private:
  [[nodiscard]] Status pin_locked(const ServerFiles& files) FLURRY_REQUIRES(mu_);

  mutable Mutex mu_;
  // What the files' stat() said at the last pin() or refresh().
  std::string seen_ FLURRY_GUARDED_BY(mu_);
  int pair_fd_ FLURRY_GUARDED_BY(mu_) = -1;
  int ca_fd_ FLURRY_GUARDED_BY(mu_) = -1;
};

}  // namespace flurry::tls
