#include "service/prometheus.h"

#include <charconv>
#include <cmath>

namespace flurry::service {
namespace {

std::string_view type_name(PrometheusWriter::Type type) {
  switch (type) {
    case PrometheusWriter::Type::kCounter:
      return "counter";
    case PrometheusWriter::Type::kGauge:
      return "gauge";
    case PrometheusWriter::Type::kHistogram:
      return "histogram";
    case PrometheusWriter::Type::kSummary:
      return "summary";
  }
  return "untyped";
}

// Label values escape backslash, double quote and line feed; HELP text backslash and line feed.
void append_escaped(std::string& out, std::string_view text, bool quote_too) {
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote_too) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

void PrometheusWriter::family(std::string_view name, Type type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  append_escaped(out_, help, false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type_name(type);
  out_ += '\n';
}

void PrometheusWriter::begin_sample(std::string_view name,
                                    std::initializer_list<PrometheusLabel> labels) {
  out_ += name;
  if (labels.size() > 0) {
    char sep = '{';
    for (const PrometheusLabel& l : labels) {
      out_ += sep;
      out_ += l.name;
      out_ += "=\"";
      append_escaped(out_, l.value, true);
      out_ += '"';
      sep = ',';
    }
    out_ += '}';
  }
  out_ += ' ';
}

void PrometheusWriter::sample(std::string_view name, double value,
                              std::initializer_list<PrometheusLabel> labels) {
  begin_sample(name, labels);
  if (std::isnan(value)) {
    out_ += "NaN";
  } else if (std::isinf(value)) {
    out_ += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    out_.append(buf,
                static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
  }
  out_ += '\n';
}

void PrometheusWriter::sample(std::string_view name, std::uint64_t value,
                              std::initializer_list<PrometheusLabel> labels) {
  begin_sample(name, labels);
  char buf[24];
  out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, value).ptr - buf));
  out_ += '\n';
}

void PrometheusWriter::latency_series(
    std::string_view name, PrometheusLabel label,
    std::span<const std::uint64_t, LatencyBuckets::kSlots> buckets, std::uint64_t sum_ns) {
  std::uint64_t total = 0;
  for (std::uint64_t b : buckets) total += b;
  if (total == 0) return;
  std::string series(name);
  const std::size_t base = series.size();
  series += "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    cumulative += buckets[b];
    sample(
        series, cumulative,
        {label, {"le", b < LatencyBuckets::kLabels.size() ? LatencyBuckets::kLabels[b] : "+Inf"}});
  }
  series.resize(base);
  series += "_sum";
  sample(series, static_cast<double>(sum_ns) / 1e9, {label});
  series.resize(base);
  series += "_count";
  sample(series, total, {label});
}

void PrometheusWriter::counter(std::string_view name, std::string_view help, std::uint64_t value) {
  family(name, Type::kCounter, help);
  sample(name, value);
}

void PrometheusWriter::gauge(std::string_view name, std::string_view help, double value) {
  family(name, Type::kGauge, help);
  sample(name, value);
}

}  // namespace flurry::service
