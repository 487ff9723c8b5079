// flurry layout: draw a layout and show its epoch, lifetime, rate limit and node count.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "flurry/clock.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct LayoutArgs {
  std::string layout = "flurry";
  bool list = false;
};

// One box of the diagram: a field, or the always-zero bits above the layout's width.
struct Box {
  std::string label;
  int hi = 0;  // bit positions, inclusive
  int lo = 0;
  bool zero = false;  // the always-zero bits above the layout's width
  std::size_t width = 0;
};

std::string centred(const std::string& text, std::size_t width) {
  if (text.size() >= width) return text;
  const std::size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text + std::string(width - text.size() - left, ' ');
}

// A diagram with one column per bit (wider only where a name or the bit positions need it);
// the box labelled 0 holds the bits above the layout's width (the sign bit at least):
//
//    63  62                                   22 21      12 11         0
//   +---+---------------------------------------+----------+------------+
//   | 0 |                 time                  |   node   |    seq     |
//   +---+---------------------------------------+----------+------------+
//                        41 bits                  10 bits     12 bits
std::string diagram(const Layout& layout) {
  constexpr std::size_t kMaxLabel = 16;
  std::vector<Box> boxes;
  if (layout.total_bits() < 64) boxes.push_back({"0", 63, layout.total_bits(), true, 0});
  for (const Field& f : layout.fields()) {
    std::string label = f.name;
    if (label.size() > kMaxLabel) label = label.substr(0, kMaxLabel - 2) + "..";
    boxes.push_back({label, f.shift + f.bits - 1, f.shift, false, 0});
  }

  std::string positions = " ";
  std::string border = "+";
  std::string names = "|";
  std::string widths = " ";
  for (Box& b : boxes) {
    const std::size_t bits = static_cast<std::size_t>(b.hi - b.lo + 1);
    const std::string hi = std::to_string(b.hi);
    const std::string lo = std::to_string(b.lo);
    const std::size_t pos_width = b.hi == b.lo ? hi.size() : hi.size() + 1 + lo.size();
    b.width = std::max({bits, b.label.size() + 2, pos_width});
    std::string count;  // none under the always-zero bits
    if (!b.zero) {
      count = std::to_string(bits) + (bits == 1 ? " bit" : " bits");
      if (count.size() > b.width) count = std::to_string(bits);
    }
    b.width = std::max(b.width, count.size());

    std::string pos = hi;
    if (b.hi != b.lo) pos += std::string(b.width - hi.size() - lo.size(), ' ') + lo;
    positions += pos + std::string(b.width - pos.size(), ' ') + ' ';
    border += std::string(b.width, '-') + '+';
    names += centred(b.label, b.width) + '|';
    widths += centred(count, b.width) + ' ';
  }
  for (std::string* line : {&positions, &widths}) {
    while (!line->empty() && line->back() == ' ') line->pop_back();
  }
  return positions + '\n' + border + '\n' + names + '\n' + border + '\n' + widths + '\n';
}

int print_layout(const std::string& text) {
  Result<Layout> parsed = Layout::parse(text);
  if (!parsed.ok()) return fail(parsed.status());
  const Layout& layout = *parsed;
  const TimePoint now = SystemClock::coarse().now();
  if (Status alive = layout.check_alive(now); !alive.ok()) return fail(alive);

  std::string nodes;
  for (const Field& f : layout.fields()) {
    if (f.kind != FieldKind::kNode) continue;
    if (!nodes.empty()) nodes += ", ";
    nodes += f.name + ":" + std::to_string(f.bits);
  }

  std::string end;
  if (layout.end() == TimePoint::max()) {
    end = "after " + format_time(TimePoint::max()) + " (beyond what 64-bit nanoseconds hold)";
  } else {
    const double seconds = std::chrono::duration<double>(layout.end() - now).count();
    char years[64];
    std::snprintf(years, sizeof years, "%.1f", seconds / (365.2425 * 86400.0));
    end = format_time(layout.end()) + " (" + years + " years from now)";
  }

  std::ostream& out = std::cout;
  out << diagram(layout) << '\n';
  if (!layout.preset_name().empty()) out << "preset       " << layout.preset_name() << '\n';
  out << "text         " << layout.to_string() << '\n';
  out << "bits         " << layout.total_bits() << '\n';
  out << "epoch        " << format_time(layout.epoch()) << '\n';
  out << "unit         " << format_duration(layout.unit()) << '\n';
  out << "ends         " << end << '\n';
  out << "rate limit   " << format_number(layout.rate_limit_per_second()) << " IDs/s per node\n";
  out << "nodes        " << layout.node_count() << " (" << nodes << ")\n";
  if (const Field* clock = layout.clock_field(); clock != nullptr) {
    out << "clock gens   " << layout.clock_generations() << " (" << clock->name << ":"
        << clock->bits << ")\n";
  }
  return kExitOk;
}

int list_presets() {
  std::size_t name_width = 0;
  std::size_t text_width = 0;
  for (const Layout::Preset& p : Layout::presets()) {
    name_width = std::max(name_width, p.name.size());
    text_width = std::max(text_width, p.text.size());
  }
  for (const Layout::Preset& p : Layout::presets()) {
    std::cout << p.name << std::string(name_width - p.name.size() + 2, ' ') << p.text
              << std::string(text_width - p.text.size() + 2, ' ') << one_line(p.summary) << '\n';
  }
  return kExitOk;
}

}  // namespace

Verb add_layout(CLI::App& app) {
  auto args = std::make_shared<LayoutArgs>();
  CLI::App* cmd = app.add_subcommand(
      "layout", "Draw a layout and show its epoch, lifetime, rate limit and node count");
  CLI::Option* text = cmd->add_option("layout", args->layout, "Layout text or preset name")
                          ->type_name("LAYOUT")
                          ->capture_default_str();
  cmd->add_flag("--list", args->list, "List the preset layouts (name, text, summary)")
      ->excludes(text);
  return {cmd, [args] { return args->list ? list_presets() : print_layout(args->layout); }};
}

}  // namespace flurry::cli
