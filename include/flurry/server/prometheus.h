// Writing the Prometheus text exposition format (version 0.0.4), for every metric source of the
// server (the service, the request metrics, the HTTP connection counters): families announced
// with HELP and TYPE, samples with escaped label values, numbers in their shortest exact form.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace flurry::server {

struct PrometheusLabel {
  std::string_view name;   // a valid label name (the caller's constant)
  std::string_view value;  // any text; escaped on output
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

  // A family with one unlabelled sample.
  void counter(std::string_view name, std::string_view help, std::uint64_t value);
  void gauge(std::string_view name, std::string_view help, double value);

 private:
  void begin_sample(std::string_view name, std::initializer_list<PrometheusLabel> labels);

  std::string& out_;
};

}  // namespace flurry::server
