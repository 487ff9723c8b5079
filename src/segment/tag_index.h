// TagIndex: the segment service's map from a tag's name to its counter, read without a lock.
//
// Every segment request looks its tag up by name; with a reader lock per call the lock's shared
// counter bounced between the cores and cost several times the ID itself on two threads. Tags are
// added rarely and never removed, so the index is an insert-only open-addressing hash table whose
// slots are atomics: a lookup loads the current table (acquire) and probes it, touching no shared
// counter. Insertions are serialised by the owner (one writer at a time, under its mutex): an item
// goes into an empty slot (its hash first, then the item with release), and when the table would
// pass half full a table twice the size is filled and published with one release store. The
// tables a reader may still be probing are kept until the index is destroyed: their sizes double,
// so all of them together hold fewer slots than the current one (RCU-like retirement, bounded).
//
// A lookup concurrent with an insertion may miss the item being added; the owner re-checks under
// its writer mutex before treating a name as absent.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace flurry::internal {

// T: any type with `const std::string& tag() const`. The index does not own the items; they must
// outlive it.
template <typename T>
class TagIndex {
 public:
  TagIndex() { publish(std::make_unique<Table>(kInitialCapacity)); }
  TagIndex(const TagIndex&) = delete;
  TagIndex& operator=(const TagIndex&) = delete;

  // The item named `name`, or null. Lock-free; any thread, concurrently with insert().
  [[nodiscard]] T* find(std::string_view name) const noexcept {
    const Table* table = current_.load(std::memory_order_acquire);
    const std::size_t hash = hash_of(name);
    // At most half the slots are used, so the probe ends at an empty slot.
    for (std::size_t i = hash & table->mask;; i = (i + 1) & table->mask) {
      const Slot& slot = table->slots[i];
      T* item = slot.item.load(std::memory_order_acquire);
      if (item == nullptr) return nullptr;
      if (slot.hash.load(std::memory_order_relaxed) == hash && same(item->tag(), name)) return item;
    }
  }

  // Adds `item` (non-null, its name not in the index yet). Callers serialise insert() calls.
  void insert(T* item) {
    Table* table = tables_.back().get();
    if ((count_ + 1) * 2 > table->mask + 1) {
      auto bigger = std::make_unique<Table>((table->mask + 1) * 2);
      for (std::size_t i = 0; i <= table->mask; ++i) {
        if (T* old = table->slots[i].item.load(std::memory_order_relaxed)) place(*bigger, old);
      }
      table = bigger.get();
      publish(std::move(bigger));
    }
    place(*table, item);
    ++count_;
  }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  static constexpr std::size_t kInitialCapacity = 16;  // a power of two

  struct Slot {
    std::atomic<std::size_t> hash{0};
    std::atomic<T*> item{nullptr};
  };
  struct Table {
    explicit Table(std::size_t capacity)
        : mask(capacity - 1), slots(std::make_unique<Slot[]>(capacity)) {}
    const std::size_t mask;
    const std::unique_ptr<Slot[]> slots;
  };

  // FNV-1a, inline: tag names are short, and the library's hash and memcmp calls were most of a
  // lookup's time (perf).
  static std::size_t hash_of(std::string_view name) noexcept {
    std::uint64_t h = 14695981039346656037ull;
    for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
  static bool same(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

  static void place(Table& table, T* item) {
    const std::size_t hash = hash_of(item->tag());
    std::size_t i = hash & table.mask;
    while (table.slots[i].item.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & table.mask;
    table.slots[i].hash.store(hash, std::memory_order_relaxed);
    table.slots[i].item.store(item, std::memory_order_release);
  }

  void publish(std::unique_ptr<Table> table) {
    tables_.push_back(std::move(table));
    current_.store(tables_.back().get(), std::memory_order_release);
  }

  std::atomic<const Table*> current_{nullptr};
  // Every table published: readers may still be probing an older one. Writer only.
  std::vector<std::unique_ptr<Table>> tables_;
  std::size_t count_ = 0;
};

}  // namespace flurry::internal
