#include "flurry/timestamp_oracle.h"

#include <algorithm>
#include <system_error>
#include <utility>
#include <vector>

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry {

namespace {

using Level = SessionEventLevel;
using std::chrono::milliseconds;

// The most values one grant takes, whatever max_lead allows: four milliseconds' worth of the
// `tso` layout. A caller with more waiting asks again.
constexpr std::uint64_t kMaxGrant = std::uint64_t{1} << 20;
constexpr milliseconds kMaxPoll{500};

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (!word.empty()) out.push_back(word);
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  return out;
}

}  // namespace

struct TimestampOracle::Term {
  std::unique_ptr<NodeSession> session;
  std::uint64_t token = 0;
};

std::string format_tso_owner(const TsoLeaderAddress& address) {
  std::string out = address.owner;
  if (!address.http.empty()) out += " http=" + address.http;
  if (!address.grpc.empty()) out += " grpc=" + address.grpc;
  return out;
}

TsoLeaderAddress parse_tso_owner(std::string_view owner) {
  TsoLeaderAddress out;
  for (std::string_view word : words(owner)) {
    if (word.starts_with("http=")) {
      out.http = std::string(word.substr(5));
    } else if (word.starts_with("grpc=")) {
      out.grpc = std::string(word.substr(5));
    } else if (out.owner.empty()) {
      out.owner = std::string(word);
    }
  }
  return out;
}

std::string_view to_string(TsoRole role) noexcept {
  switch (role) {
    case TsoRole::kElecting:
      return "electing";
    case TsoRole::kLeader:
      return "leader";
    case TsoRole::kFollower:
      return "follower";
  }
  return "unknown";
}

Result<std::unique_ptr<TimestampOracle>> TimestampOracle::create(NodeRegistry& registry,
                                                                 HorizonFloor& floor, Layout layout,
                                                                 TsoOptions options,
                                                                 Clocks clocks) {
  int seq_bits = 0;
  bool seq_lowest = false;
  for (const Field& field : layout.fields()) {
    if (field.kind == FieldKind::kSeq) {
      seq_bits = field.bits;
      seq_lowest = field.shift == 0;
    }
  }
  if (layout.node_count() != 1 || layout.clock_generations() != 1 || !seq_lowest) {
    return InvalidArgument(
        "the timestamp oracle needs a layout of time and seq only, seq lowest "
        "(the tso preset), not " +
        layout.to_string());
  }
  options.generator.node = 0;
  options.generator.background_horizon = true;
  if (Status st = Generator::check_options(layout, options.generator); !st.ok()) {
    return st.with_prefix("timestamp oracle");
  }
  // What max_lead lets one grant take (the generator's own max_batch), at most kMaxGrant.
  const std::int64_t lead_ticks = options.generator.max_lead / layout.unit();
  const std::uint64_t by_lead =
      (static_cast<std::uint64_t>(std::min<std::int64_t>(lead_ticks, 1 << 20)) + 1) << seq_bits;
  return std::unique_ptr<TimestampOracle>(new TimestampOracle(registry, floor, std::move(layout),
                                                              std::move(options), clocks,
                                                              std::min(by_lead, kMaxGrant)));
}

TimestampOracle::TimestampOracle(NodeRegistry& registry, HorizonFloor& floor, Layout layout,
                                 TsoOptions options, Clocks clocks, std::uint64_t max_batch)
    : registry_(registry),
      floor_(floor),
      layout_(std::move(layout)),
      options_(std::move(options)),
      clocks_(clocks),
      max_batch_(max_batch),
      poll_(options_.poll_interval > milliseconds(0) ? options_.poll_interval : kMaxPoll),
      context_{.registry = registry_,
               .floor = floor_,
               .layout = layout_,
               .generator = options_.generator,
               .clocks = clocks_,
               .owner = {},
               .on_regression = nullptr,
               .log = options_.log,
               .host_guard = false,
               .keeper = {.renew_interval = milliseconds(0),
                          .safety_margin = milliseconds(0),
                          .unsafe_ignore_expiry = options_.unsafe_skip_gate}} {}

TimestampOracle::~TimestampOracle() {
  stop();
}

void TimestampOracle::log(SessionEventLevel level, const std::string& line) const {
  if (options_.log) options_.log(level, line);
}

Status TimestampOracle::start(TsoLeaderAddress self) {
  if (thread_.joinable()) return OkStatus();
  context_.owner = format_tso_owner(self);
  {
    MutexLock lock(mu_);
    self_ = std::move(self);
  }
  if (options_.unsafe_skip_gate) {
    log(Level::kError,
        "event=tso_unsafe_fault fault=skip-gate message=\"TEST ONLY: the oracle answers past its "
        "lease; its timestamps are NOT linearizable\"");
  }
  try {
    thread_ = std::thread([this, stop = stop_.get_token()] { campaign(stop); });
  } catch (const std::system_error& e) {
    return Status(StatusCode::kResourceExhausted,
                  std::string("cannot start the timestamp oracle: no thread: ") + e.what());
  }
  return OkStatus();
}

void TimestampOracle::stop() {
  stop_.request_stop();
  if (thread_.joinable()) thread_.join();
  end_term(false, "stop");
}

std::shared_ptr<TimestampOracle::Term> TimestampOracle::current() const {
  MutexLock lock(mu_);
  return term_;
}

bool TimestampOracle::proven(const Term& term) const {
  return options_.unsafe_skip_gate ||
         clocks_.monotonic.now() < term.session->keeper().valid_until();
}

void TimestampOracle::campaign(std::stop_token stop) {
  while (!stop.stop_requested()) {
    if (std::shared_ptr<Term> term = current()) {
      const Status lease = term->session->keeper().status();
      if (is_lease_gone(lease)) {
        end_term(true, lease.message());
        continue;  // look for the new leader at once
      }
    } else if (try_to_lead(stop)) {
      continue;
    }
    if (!clocks_.monotonic.wait_until(clocks_.monotonic.now() + poll_, stop)) return;
  }
}

std::shared_ptr<TimestampOracle::Term> TimestampOracle::try_to_lead(std::stop_token stop) {
  // Who leads, if anyone: the live lease's owner names its addresses.
  Result<RegistryListing> listing = registry_.list();
  if (listing.ok()) {
    for (const NodeInfo& node : listing->nodes) {
      if (node.node != 0 || !node.live) continue;
      TsoLeaderAddress leader = parse_tso_owner(node.owner);
      MutexLock lock(mu_);
      // A lease of an earlier process at this very address (a restart within the TTL): sending
      // clients there would send them back here. Nobody leads until it expires.
      if (leader.http == self_.http && leader.grpc == self_.grpc) break;
      if (leader_ != leader) {
        log(Level::kInfo, "event=tso_follower leader=" + internal::quote(node.owner) +
                              " term=" + std::to_string(node.token));
      }
      leader_ = std::move(leader);
      role_ = TsoRole::kFollower;
      return nullptr;
    }
  }
  {
    MutexLock lock(mu_);
    leader_.reset();  // the lease is free (or the registry cannot say): nobody to send clients to
    role_ = TsoRole::kElecting;
  }
  // The lease is free, or the listing failed and a claim will say why.
  Result<std::unique_ptr<NodeSession>> session = NodeSession::open(context_, stop);
  if (!session.ok()) {
    if (session.status().reason() != Reason::kNoFreeNode) {
      log(Level::kWarning, "event=tso_claim_failed " + describe(session.status()));
    }
    return nullptr;  // another process won; the next look finds it
  }
  auto term = std::make_shared<Term>();
  term->token = (*session)->lease().token;
  term->session = std::move(session).value();
  {
    MutexLock lock(mu_);
    term_ = term;
    leader_ = self_;
    role_ = TsoRole::kLeader;
    ++leader_changes_;
  }
  log(Level::kInfo, "event=tso_leader term=" + std::to_string(term->token) +
                        " inherited=" + (term->session->inherited() ? "true" : "false") +
                        " waited=" + internal::millis_text(term->session->waited()));
  return term;
}

void TimestampOracle::end_term(bool lease_lost, std::string_view why) {
  std::shared_ptr<Term> term;
  {
    MutexLock lock(mu_);
    term = std::move(term_);
    term_.reset();
    if (term == nullptr) return;
    leader_.reset();
    role_ = TsoRole::kElecting;
  }
  // Requests still holding the term see the generator closed (SHUT_DOWN) from here on.
  term->session->shut_down(lease_lost, "tso term end");
  const GeneratorStats stats = term->session->generator().stats();
  {
    MutexLock lock(mu_);
    saves_before_ += stats.horizon_saves;
    failures_before_ += stats.horizon_failures;
  }
  log(lease_lost ? Level::kWarning : Level::kInfo,
      "event=tso_term_ended term=" + std::to_string(term->token) +
          " lease_lost=" + (lease_lost ? "true" : "false") + " why=" + internal::quote(why));
}

Status TimestampOracle::not_leader() const {
  MutexLock lock(mu_);
  if (leader_ && *leader_ != self_) {
    return Status(Reason::kNotLeader,
                  "this server does not lead the timestamp oracle; the leader is " +
                      format_tso_owner(*leader_));
  }
  return Status(Reason::kNoLeader,
                "the timestamp oracle has no leader now (an election is under way); retry");
}

Result<TsoGrant> TimestampOracle::grant(std::uint64_t count, Blocking blocking) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  const std::shared_ptr<Term> term = current();
  if (term == nullptr) {
    not_leader_.fetch_add(1, std::memory_order_relaxed);
    return not_leader();
  }
  if (count == 0 || count > max_batch_) {
    return Status(Reason::kBatchTooLarge, "a grant holds 1 to " + std::to_string(max_batch_) +
                                              " timestamps, not " + std::to_string(count));
  }
  const MonoTime began = clocks_.monotonic.now();
  Result<std::uint64_t> first = term->session->generator().next_range(count, blocking);
  // Read after the values were taken: the gate below must see a moment no earlier than that.
  const MonoTime taken = clocks_.monotonic.now();
  wait_ns_.fetch_add((taken - began).count(), std::memory_order_relaxed);
  if (!first.ok()) {
    if (is_lease_gone(first.status()) || first.status().reason() == Reason::kShutDown) {
      // The term is over (the campaign thread ends it): tell the caller where to go instead.
      not_leader_.fetch_add(1, std::memory_order_relaxed);
      return Status(Reason::kNoLeader, "the timestamp oracle's term " +
                                           std::to_string(term->token) +
                                           " ended: " + first.status().message() + "; retry");
    }
    return first.status();
  }
  if (!options_.unsafe_skip_gate && taken >= term->session->keeper().valid_until()) {
    gate_refusals_.fetch_add(1, std::memory_order_relaxed);
    return Status(Reason::kLeaseExpiring,
                  "the timestamp oracle's lease (term " + std::to_string(term->token) +
                      ") was not proven when the timestamps were taken; they are dropped");
  }
  timestamps_.fetch_add(count, std::memory_order_relaxed);
  return TsoGrant{.first = *first, .count = count, .term = term->token};
}

std::uint64_t TimestampOracle::term() const {
  const std::shared_ptr<Term> term = current();
  return term ? term->token : 0;
}

Status TimestampOracle::check_term(std::uint64_t wanted) const {
  const std::shared_ptr<Term> term = current();
  if (term == nullptr || term->token != wanted) return not_leader();
  if (!proven(*term)) {
    return Status(Reason::kLeaseExpiring, "the timestamp oracle's lease (term " +
                                              std::to_string(term->token) + ") is not proven now");
  }
  return OkStatus();
}

std::optional<TsoLeaderAddress> TimestampOracle::leader() const {
  MutexLock lock(mu_);
  return leader_;
}

Status TimestampOracle::readiness() const {
  const std::shared_ptr<Term> term = current();
  if (term == nullptr) return not_leader();
  if (!proven(*term)) {
    return Status(Reason::kLeaseExpiring, "the timestamp oracle's lease (term " +
                                              std::to_string(term->token) + ") is not proven now");
  }
  return term->session->generator().health();
}

TsoStats TimestampOracle::stats() const {
  TsoStats s;
  std::shared_ptr<Term> term;
  {
    MutexLock lock(mu_);
    term = term_;
    s.role = role_;
    s.leader_changes = leader_changes_;
    s.window_saves = saves_before_;
    s.window_failures = failures_before_;
  }
  if (term != nullptr) {
    const GeneratorStats g = term->session->generator().stats();
    s.term = term->token;
    s.window_saves += g.horizon_saves;
    s.window_failures += g.horizon_failures;
    s.window_ahead_ticks = g.horizon_ahead_ticks;
  }
  s.requests = requests_.load(std::memory_order_relaxed);
  s.timestamps = timestamps_.load(std::memory_order_relaxed);
  s.not_leader = not_leader_.load(std::memory_order_relaxed);
  s.gate_refusals = gate_refusals_.load(std::memory_order_relaxed);
  s.wait_total = Nanos(wait_ns_.load(std::memory_order_relaxed));
  return s;
}

}  // namespace flurry
