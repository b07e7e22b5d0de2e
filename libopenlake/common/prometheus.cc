// Prometheus text exposition (see openlake/prometheus.h).
#include "openlake/prometheus.h"

#include <cmath>
#include <cstdio>

namespace openlake {
namespace {

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", v);
  }
  return buf;
}

}  // namespace

const std::vector<double>& PrometheusWriter::Ladder() {
  static const std::vector<double> ladder = {1e-5,  2.5e-5, 5e-5, 1e-4,  2.5e-4, 5e-4, 1e-3,
                                             2.5e-3, 5e-3,  1e-2, 2.5e-2, 5e-2,  0.1,  0.25,
                                             0.5,    1,     2.5,  5,     10};
  return ladder;
}

void PrometheusWriter::Family(std::string_view name, std::string_view help,
                              std::string_view type) {
  if (families_.find(name) != families_.end()) return;
  families_.emplace(name);
  out_.append("# HELP ").append(name).append(" ").append(EscapeHelp(help)).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void PrometheusWriter::Sample(std::string_view name, const PrometheusLabels& labels,
                              double value, std::string_view extra_label,
                              std::string_view extra_value) {
  out_.append(name);
  if (!labels.empty() || !extra_label.empty()) {
    out_.push_back('{');
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_.push_back(',');
      first = false;
      out_.append(k).append("=\"").append(EscapeLabel(v)).append("\"");
    }
    if (!extra_label.empty()) {
      if (!first) out_.push_back(',');
      out_.append(extra_label).append("=\"").append(extra_value).append("\"");
    }
    out_.push_back('}');
  }
  out_.append(" ").append(Number(value)).append("\n");
}

void PrometheusWriter::Counter(std::string_view name, std::string_view help, double value,
                               const PrometheusLabels& labels) {
  Family(name, help, "counter");
  Sample(name, labels, value);
}

void PrometheusWriter::Gauge(std::string_view name, std::string_view help, double value,
                             const PrometheusLabels& labels) {
  Family(name, help, "gauge");
  Sample(name, labels, value);
}

void PrometheusWriter::Histogram(std::string_view name, std::string_view help,
                                 const HistogramSnapshot& h, double scale,
                                 const PrometheusLabels& labels) {
  Family(name, help, "histogram");
  const std::string base(name);
  // Each source bucket counts toward the first ladder step at or above its upper bound.
  const std::vector<double>& ladder = Ladder();
  std::vector<uint64_t> per_step(ladder.size() + 1, 0);
  for (size_t i = 0; i < h.buckets.size(); ++i) {
    if (h.buckets[i] == 0) continue;
    const double upper = static_cast<double>(HistogramSnapshot::BucketUpperBound(
                             static_cast<int>(i))) * scale;
    size_t step = 0;
    while (step < ladder.size() && ladder[step] < upper) ++step;
    per_step[step] += h.buckets[i];
  }
  uint64_t cumulative = 0;
  for (size_t s = 0; s < ladder.size(); ++s) {
    cumulative += per_step[s];
    Sample(base + "_bucket", labels, static_cast<double>(cumulative), "le", Number(ladder[s]));
  }
  Sample(base + "_bucket", labels, static_cast<double>(h.count), "le", "+Inf");
  Sample(base + "_sum", labels, static_cast<double>(h.sum) * scale);
  Sample(base + "_count", labels, static_cast<double>(h.count));
}

}  // namespace openlake
