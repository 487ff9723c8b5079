// What the segment service's unit tests share: a real SQLite store in a file, and a bounded wait
// for what a background thread establishes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "flurry/segment_store.h"

namespace flurry::testing {

// Waits for a condition that a background thread establishes (a prefetch), up to 10 s of real
// time. Not a timing assertion: it only bounds how long a broken implementation hangs the test.
inline bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A SQLite segment store in `file` (created when missing); null, with a test failure, when it
// cannot be opened.
inline std::unique_ptr<SegmentStore> sqlite_store(const std::filesystem::path& file) {
  SegmentStoreSpec spec;
  spec.kind = SegmentStoreSpec::Kind::kSqlite;
  spec.sqlite_path = file;
  Result<std::unique_ptr<SegmentStore>> store = open_segment_store(spec);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().to_string();
    return nullptr;
  }
  return std::move(*store);
}

}  // namespace flurry::testing
