// JUnit XML and GitHub Actions annotations of a Report (junit.h).
#include "leakbound/reports/junit.h"

#include <cstdio>

#include "leakbound/reports/format.h"
#include "leakbound/reports/verdict_class.h"

namespace leakbound::reports {
namespace {

// XML 1.0 text or attribute value: the five entities escaped, control characters other than
// tab, newline and carriage return dropped (XML cannot carry them, even escaped). UTF-8 is
// passed through (the report's strings are valid UTF-8).
std::string XmlEscaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += c;
    }
  }
  return out;
}

// A watched program has no expectation: it fails on a memory finding. A suite's workload fails
// when it did not meet its expectation (a zoo entry whose planted leak was found passes).
bool Failed(const WorkloadResult& w) {
  if (w.verdict == kInconclusive || w.verdict == kError) return false;
  return w.kind == "watched" ? IsMemoryFinding(w.verdict) : !w.met_expectation;
}

// "unbounded-growth: host.heap_bytes +24 B/step; top: main at c_steps.c:80 (...)"
std::string FailureMessage(const WorkloadResult& w) {
  std::string message = std::string(VerdictName(w.verdict));
  if (const std::string growth = GrowthText(w); !growth.empty()) message += ": " + growth;
  if (w.kind != "watched" && !w.met_expectation) {
    message += " (expected " + std::string(VerdictName(w.expectation)) + ")";
  }
  if (const std::string owner = TopOwnerText(w); !owner.empty()) message += "; top: " + owner;
  return message;
}

// GitHub workflow command escaping: data (%, CR, LF) and property values (also : and ,).
std::string CommandData(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}

std::string CommandProperty(std::string_view text) {
  std::string out;
  for (const char c : CommandData(text)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

}  // namespace

std::string RenderJunit(const Report& report) {
  int failures = 0, errors = 0;
  for (const WorkloadResult& w : report.workloads) {
    if (Failed(w)) ++failures;
    if (w.verdict == kInconclusive || w.verdict == kError) ++errors;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", report.meta.wall_seconds);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"leakbound\" tests=\"" + std::to_string(report.workloads.size()) +
         "\" failures=\"" + std::to_string(failures) + "\" errors=\"" + std::to_string(errors) +
         "\" time=\"" + seconds + "\">\n";
  out += "  <testsuite name=\"leakbound\" tests=\"" + std::to_string(report.workloads.size()) +
         "\" failures=\"" + std::to_string(failures) + "\" errors=\"" + std::to_string(errors) +
         "\" time=\"" + seconds + "\">\n";
  for (const WorkloadResult& w : report.workloads) {
    out += "    <testcase classname=\"leakbound." + XmlEscaped(w.kind.empty() ? "workload" : w.kind) +
           "\" name=\"" + XmlEscaped(w.name) + "\"";
    if (Failed(w)) {
      out += ">\n      <failure type=\"" + XmlEscaped(VerdictName(w.verdict)) + "\" message=\"" +
             XmlEscaped(FailureMessage(w)) + "\">" + XmlEscaped(w.evidence) +
             "</failure>\n    </testcase>\n";
    } else if (w.verdict == kInconclusive || w.verdict == kError) {
      out += ">\n      <error type=\"" + XmlEscaped(VerdictName(w.verdict)) + "\" message=\"" +
             XmlEscaped(std::string(VerdictName(w.verdict)) + ": " + w.evidence) + "\">" +
             XmlEscaped(w.evidence) + "</error>\n    </testcase>\n";
    } else {
      out += "/>\n";
    }
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::optional<SourceLine> SourceLineOf(std::string_view op) {
  const size_t at = op.find(" at ");
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = op.substr(at + 4);
  const size_t end = rest.find(" (");
  const std::string_view location = rest.substr(0, end);
  const size_t colon = location.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= location.size()) {
    return std::nullopt;
  }
  int line = 0;
  for (const char c : location.substr(colon + 1)) {
    if (c < '0' || c > '9' || line > 10'000'000) return std::nullopt;
    line = line * 10 + (c - '0');
  }
  if (line <= 0) return std::nullopt;
  return SourceLine{std::string(location.substr(0, colon)), line};
}

std::vector<std::string> GithubAnnotations(const Report& report, std::string_view workspace) {
  std::vector<std::string> out;
  for (const WorkloadResult& w : report.workloads) {
    if (!IsMemoryFinding(w.verdict)) continue;
    std::string properties = "title=" + CommandProperty("leakbound: " + w.name + " " +
                                                        std::string(VerdictName(w.verdict)));
    if (!w.attribution.empty()) {
      if (const std::optional<SourceLine> source = SourceLineOf(w.attribution.front().op)) {
        std::string file = source->file;
        const std::string prefix = std::string(workspace) + "/";
        if (!workspace.empty() && file.rfind(prefix, 0) == 0) file = file.substr(prefix.size());
        properties = "file=" + CommandProperty(file) + ",line=" + std::to_string(source->line) +
                     "," + properties;
      }
    }
    out.push_back("::error " + properties + "::" + CommandData(FailureMessage(w)));
  }
  return out;
}

}  // namespace leakbound::reports
