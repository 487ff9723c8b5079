// SegmentService, the facade: its options, the tags by name (first lookups shared by concurrent
// callers, unknown tags remembered), creating and listing tags, and the stores' rows.
// segment_service_impl.h lists the other files; include/flurry/segment_service.h and
// docs/segments.md give the contract.
#include "flurry/segment_service.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "core/private_files.h"
#include "core/quote.h"
#include "segment_service_impl.h"

namespace flurry {

using std::chrono::milliseconds;

Status internal::segment_service_stopping() {
  return Status(Reason::kShutDown, "the segment service is stopping");
}

Status internal::no_such_segment_tag(std::string_view name) {
  return Status(StatusCode::kNotFound, "no segment tag " + internal::quote(name) +
                                           " (create it first: POST /v1/segments or "
                                           "`flurry segment create`)");
}

Status internal::strict_tag_needs_leader(std::string_view name) {
  return Status(StatusCode::kFailedPrecondition,
                "segment tag " + internal::quote(name) +
                    " is strict: only the timestamp oracle's leader serves it (flurry serve "
                    "--tso), from one segment store");
}

Status check_segment_options(const SegmentOptions& o) {
  if (!(o.prefetch_at > 0.0 && o.prefetch_at < 1.0)) {
    return InvalidArgument("segment prefetch share must be above 0 and below 1, got " +
                           std::to_string(o.prefetch_at));
  }
  if (o.target_duration <= milliseconds::zero()) {
    return InvalidArgument("segment target duration must be positive");
  }
  if (o.max_step < 1 || o.max_step > kMaxSegmentStep) {
    return InvalidArgument("segment max step must be 1 to " + std::to_string(kMaxSegmentStep) +
                           ", got " + std::to_string(o.max_step));
  }
  if (o.max_wait < milliseconds::zero()) {
    return InvalidArgument("segment max wait must not be negative");
  }
  if (o.max_batch < 1 || o.max_batch > kMaxSegmentStep) {
    return InvalidArgument("segment max batch must be 1 to " + std::to_string(kMaxSegmentStep) +
                           ", got " + std::to_string(o.max_batch));
  }
  if (o.unknown_tag_ttl <= milliseconds::zero()) {
    return InvalidArgument("segment unknown-tag TTL must be positive");
  }
  if (o.regression_log_interval < milliseconds::zero()) {
    return InvalidArgument("segment regression log interval must not be negative");
  }
  return OkStatus();
}

SegmentService::Impl::Impl(std::vector<std::unique_ptr<SegmentStore>> stores,
                           SegmentOptions options, Clocks clocks)
    : stores_(std::move(stores)),
      options_(std::move(options)),
      clocks_(clocks),
      floors_(options_.floor_dir, options_.host_dir) {
  for (const auto& s : stores_) names_.push_back(s->describe());
}

bool SegmentService::Impl::known_unknown(std::string_view name) {
  MutexLock lock(unknown_mu_);
  const auto it = unknown_.find(std::string(name));
  if (it == unknown_.end()) return false;
  if (clocks_.monotonic.now() >= it->second) {
    unknown_.erase(it);
    return false;
  }
  unknown_hits_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void SegmentService::Impl::remember_unknown(std::string_view name) {
  const MonoTime now = clocks_.monotonic.now();
  MutexLock lock(unknown_mu_);
  if (unknown_.size() >= internal::kMaxUnknownTags) {
    std::erase_if(unknown_, [now](const auto& entry) { return now >= entry.second; });
    if (unknown_.size() >= internal::kMaxUnknownTags) unknown_.clear();
  }
  unknown_[std::string(name)] = now + options_.unknown_tag_ttl;
}

void SegmentService::Impl::forget_unknown(std::string_view name) {
  MutexLock lock(unknown_mu_);
  unknown_.erase(std::string(name));
}

Result<SegmentService::Impl::Tag*> SegmentService::Impl::find(const SegmentTag& tag,
                                                              Blocking blocking) {
  const std::string_view name = tag.view();
  if (Tag* found = index_.find(name)) return found;
  if (stopping()) return internal::segment_service_stopping();
  if (known_unknown(name)) return internal::no_such_segment_tag(name);
  if (blocking == Blocking::kNever) {
    return Status(Reason::kWouldBlock,
                  "segment tag " + internal::quote(name) + " must be looked up in the store");
  }
  // One store read per tag however many callers ask at once; other tags are not held up.
  std::shared_ptr<Lookup> lookup;
  bool leader = false;
  {
    MutexLock lock(lookups_mu_);
    auto [it, inserted] = lookups_.try_emplace(std::string(name));
    if (inserted && known_unknown(name)) {
      // A lookup that finished between the check above and this lock remembered the answer.
      lookups_.erase(it);
      return internal::no_such_segment_tag(name);
    }
    if (inserted) it->second = std::make_shared<Lookup>();
    lookup = it->second;
    leader = inserted;
    if (!leader) {
      lock.wait(lookup->cv, [&]() FLURRY_REQUIRES(lookups_mu_) { return lookup->done; });
      if (lookup->tag != nullptr) return lookup->tag;
      return lookup->status;
    }
  }
  Result<Tag*> got = look_up(tag);
  MutexLock lock(lookups_mu_);
  lookup->done = true;
  if (got.ok()) {
    lookup->tag = *got;
  } else {
    lookup->status = got.status();
  }
  lookups_.erase(std::string(name));
  lookup->cv.notify_all();
  return got;
}

Result<SegmentTagInfo> SegmentService::Impl::stored_tag(const SegmentTag& tag) {
  const std::string_view name = tag.view();
  if (known_unknown(name)) return internal::no_such_segment_tag(name);
  std::string errors;
  bool unavailable = false;
  for (std::size_t s = 0; s < stores_.size(); ++s) {
    store_reads_.fetch_add(1, std::memory_order_relaxed);
    Result<SegmentTagInfo> info = stores_[s]->tag(tag);
    if (info.ok()) return info;
    if (info.status().code() != StatusCode::kNotFound) unavailable = true;
    if (!errors.empty()) errors += "; ";
    errors += names_[s] + ": " + info.status().to_string();
  }
  if (unavailable) {
    return Status(Reason::kIo, "segment tag " + internal::quote(name) +
                                   ": no store could be asked for it (" + errors + ")");
  }
  remember_unknown(name);
  return internal::no_such_segment_tag(name);
}

Status SegmentService::Impl::create_tag(const SegmentTagSpec& spec) {
  if (Status st = check_segment_tag_spec(spec); !st.ok()) return st;
  const std::size_t n = stores_.size();
  if (n > 1 && (spec.delta != 1 || spec.remainder != 0)) {
    return InvalidArgument("delta and remainder are set per store: with " + std::to_string(n) +
                           " stores, store k gets delta " + std::to_string(n) +
                           " and remainder k; leave them out");
  }
  if (n > 1 && spec.strict) {
    return Status(StatusCode::kFailedPrecondition,
                  "a strict segment tag needs one segment store: the numbers of " +
                      std::to_string(n) + " stores are not ordered with each other");
  }
  for (std::size_t s = 0; s < n; ++s) {
    SegmentTagSpec one = spec;
    if (n > 1) {
      one.delta = n;
      one.remainder = s;
    }
    if (Status st = stores_[s]->create_tag(one); !st.ok()) {
      return n > 1 ? st.with_prefix(names_[s]) : st;
    }
  }
  forget_unknown(spec.tag);
  return OkStatus();
}

Result<std::vector<SegmentTagInfo>> SegmentService::Impl::list_tags() {
  std::map<std::string, SegmentTagInfo> all;
  std::string errors;
  std::size_t answered = 0;
  for (std::size_t s = 0; s < stores_.size(); ++s) {
    Result<std::vector<SegmentTagInfo>> got = stores_[s]->list_tags();
    if (!got.ok()) {
      if (!errors.empty()) errors += "; ";
      errors += names_[s] + ": " + got.status().to_string();
      continue;
    }
    ++answered;
    for (SegmentTagInfo& t : *got) all.try_emplace(t.tag, std::move(t));
  }
  if (answered == 0) return Status(Reason::kIo, "no segment store answered (" + errors + ")");
  std::vector<SegmentTagInfo> out;
  out.reserve(all.size());
  for (auto& [name, info] : all) out.push_back(std::move(info));
  return out;
}

// ---- SegmentService ----

Result<std::unique_ptr<SegmentService>> SegmentService::create(
    std::vector<std::unique_ptr<SegmentStore>> stores, SegmentOptions options, Clocks clocks) {
  if (stores.empty()) return InvalidArgument("segment mode needs at least one store");
  for (const auto& s : stores) {
    if (s == nullptr) return InvalidArgument("a segment store is null");
  }
  if (Status st = check_segment_options(options); !st.ok()) return st;
  if (!options.floor_dir.empty()) {
    // Usable now rather than at the first range: a planted link or a foreign directory is a
    // refused start, not a 503 on every tag later.
    internal::PrivateDirLock probe;
    if (Status st = probe.lock(options.floor_dir); !st.ok()) {
      return st.with_prefix("the segment store floors");
    }
  }
  return std::unique_ptr<SegmentService>(
      new SegmentService(std::make_unique<Impl>(std::move(stores), options, clocks)));
}

SegmentService::SegmentService(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentService::~SegmentService() = default;

Status SegmentService::next(const SegmentTag& tag, IdCount count, std::span<std::uint64_t> out,
                            Blocking blocking, std::uint64_t term) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return (*t)->next(count, out, blocking, term);
}

Result<SegmentCounter*> SegmentService::counter(const SegmentTag& tag, Blocking blocking) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return static_cast<SegmentCounter*>(*t);
}

Result<SegmentRange> SegmentService::range(const SegmentTag& tag, IdCount size, Blocking blocking,
                                           std::uint64_t term) {
  Result<Impl::Tag*> t = impl_->find(tag, blocking);
  if (!t.ok()) return t.status();
  return (*t)->range(size, blocking, term);
}

Status SegmentService::create_tag(const SegmentTagSpec& spec) {
  return impl_->create_tag(spec);
}

Result<std::vector<SegmentTagInfo>> SegmentService::list_tags() {
  return impl_->list_tags();
}

Result<std::uint64_t> SegmentService::stored_max_id(const SegmentTag& tag) {
  std::optional<std::uint64_t> highest;
  for (std::size_t s = 0; s < impl_->stores_.size(); ++s) {
    Result<SegmentTagInfo> row = impl_->stores_[s]->tag(tag);
    if (!row.ok()) {
      if (row.status().code() == StatusCode::kNotFound) continue;
      return row.status().with_prefix(impl_->names_[s]);
    }
    highest = std::max(highest.value_or(0), row->max_id);
  }
  if (!highest) {
    return Status(StatusCode::kNotFound, "no segment store has tag " + internal::quote(tag.view()));
  }
  return *highest;
}

Result<SegmentTagInfo> SegmentService::stored_tag(const SegmentTag& tag) {
  return impl_->stored_tag(tag);
}

SegmentService::LookupCounts SegmentService::lookup_counts() const noexcept {
  return {impl_->store_reads_.load(std::memory_order_relaxed),
          impl_->unknown_hits_.load(std::memory_order_relaxed)};
}

Result<SegmentTagState> SegmentService::inspect(std::string_view tag) const {
  MutexLock lock(impl_->tags_mu_);
  auto it = impl_->tags_.find(tag);
  if (it == impl_->tags_.end()) {
    return Status(StatusCode::kNotFound,
                  "segment tag " + internal::quote(tag) + " has not been served by this node");
  }
  return it->second->state();
}

std::vector<SegmentTagState> SegmentService::inspect_all() const {
  std::vector<SegmentTagState> out;
  MutexLock lock(impl_->tags_mu_);
  out.reserve(impl_->tags_.size());
  for (const auto& [name, tag] : impl_->tags_) out.push_back(tag->state());
  return out;
}

const SegmentOptions& SegmentService::options() const noexcept {
  return impl_->options_;
}

std::vector<std::string> SegmentService::store_names() const {
  return impl_->names_;
}

}  // namespace flurry
