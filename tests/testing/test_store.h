// Test helpers around the real FileHorizonStore: a temporary directory, and a wrapper that
// injects save failures and records what was saved (fault injection, not a fake store).
#pragma once

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "flurry/horizon.h"

namespace flurry::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/flurry-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Delegates to a FileHorizonStore; saves fail while fail_saves is set, and every successful
// save is remembered. Thread-safe.
class FaultyStore final : public HorizonStore {
 public:
  explicit FaultyStore(std::filesystem::path file) : inner_(std::move(file)) {}

  [[nodiscard]] Result<HorizonRecord> load() override { return inner_.load(); }
  [[nodiscard]] Status save(const HorizonRecord& record) override {
    if (fail_saves.load()) {
      return Status(Reason::kIo, "injected failure: disk unavailable");
    }
    Status st = inner_.save(record);
    if (st.ok()) {
      std::lock_guard lock(mu_);
      saved_.push_back(record);
    }
    return st;
  }
  [[nodiscard]] std::string describe() const override { return inner_.describe(); }

  [[nodiscard]] std::vector<HorizonRecord> saved() const {
    std::lock_guard lock(mu_);
    return saved_;
  }

  std::atomic<bool> fail_saves{false};

 private:
  FileHorizonStore inner_;
  mutable std::mutex mu_;
  std::vector<HorizonRecord> saved_;
};

}  // namespace flurry::testing
