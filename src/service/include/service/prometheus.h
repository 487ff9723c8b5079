// Writing the Prometheus text exposition format (version 0.0.4), for every metric source of the
// server (the service, the request metrics, the HTTP connection counters): families announced
// with HELP and TYPE, samples with escaped label values, numbers in their shortest exact form.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace flurry::service {

struct PrometheusLabel {
  std::string_view name;   // a valid label name (the caller's constant)
  std::string_view value;  // any text; escaped on output
};

// The buckets of every latency histogram the server exports (HTTP requests, gRPC calls): upper
// bounds from 50 us to 1 s, then +Inf, so that the transports' figures compare bucket by bucket.
struct LatencyBuckets {
  // Upper bounds in nanoseconds.
  static constexpr std::array<std::int64_t, 14> kBoundsNs = {
      50'000,     100'000,    250'000,    500'000,     1'000'000,   2'500'000,   5'000'000,
      10'000'000, 25'000'000, 50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000};
  // The same bounds as the `le` label writes them (seconds), in the same order.
  static constexpr std::array<std::string_view, kBoundsNs.size()> kLabels = {
      "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
      "0.01",  "0.025",  "0.05",    "0.1",    "0.25",  "0.5",    "1"};
  // One count per bound, then the +Inf bucket.
  static constexpr std::size_t kSlots = kBoundsNs.size() + 1;

  // The bucket a duration of `ns` nanoseconds falls in (not cumulative): the first bound it does
  // not exceed, else the +Inf slot. A negative duration counts as 0.
  [[nodiscard]] static constexpr std::size_t slot(std::int64_t ns) noexcept {
    for (std::size_t i = 0; i < kBoundsNs.size(); ++i) {
      if (ns <= kBoundsNs[i]) return i;
    }
    return kBoundsNs.size();
  }
};

// Appends to a string it does not own. Not thread-safe (one writer per rendering).
class PrometheusWriter {
 public:
  enum class Type { kCounter, kGauge, kHistogram, kSummary };

  explicit PrometheusWriter(std::string& out) noexcept : out_(out) {}

  // "# HELP <name> <help>" and "# TYPE <name> <type>"; once per family, before its samples.
  void family(std::string_view name, Type type, std::string_view help);

  // "<name>{<labels>} <value>". Doubles: shortest round-trip form, +Inf/-Inf/NaN spelled as the
  // format wants.
  void sample(std::string_view name, double value,
              std::initializer_list<PrometheusLabel> labels = {});
  void sample(std::string_view name, std::uint64_t value,
              std::initializer_list<PrometheusLabel> labels = {});

  // One labelled series of a latency histogram whose family was announced: `<name>_bucket` per
  // bound of LatencyBuckets (cumulative, `label` then `le`), `<name>_sum` (seconds) and
  // `<name>_count`. Writes nothing when every bucket is 0. `buckets` are per-slot counts (not
  // cumulative); `sum_ns` the durations added up, in nanoseconds.
  void latency_series(std::string_view name, PrometheusLabel label,
                      std::span<const std::uint64_t, LatencyBuckets::kSlots> buckets,
                      std::uint64_t sum_ns);

  // A family with one unlabelled sample.
  void counter(std::string_view name, std::string_view help, std::uint64_t value);
  void gauge(std::string_view name, std::string_view help, double value);

 private:
  void begin_sample(std::string_view name, std::initializer_list<PrometheusLabel> labels);

  std::string& out_;
};

}  // namespace flurry::service
