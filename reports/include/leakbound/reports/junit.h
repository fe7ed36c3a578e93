// CI output of a Report: JUnit XML (one test case per workload, which CI systems show as tests)
// and GitHub Actions workflow commands (`::error file=F,line=L::...` annotations on the line that
// allocates what grows).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "leakbound/reports/report.h"

namespace leakbound::reports {

// JUnit XML: a <testsuite name="leakbound"> with one <testcase> per workload. A watched
// program's memory finding, or a suite workload that did not meet its expectation (a zoo entry
// whose planted leak was found passes), is a <failure type="CLASS"> whose message
// carries the class, the rate and the top growing call site, and whose text is the evidence; an
// inconclusive or failed run is an <error>; a PASS has no child. Text is XML-escaped and
// characters XML 1.0 cannot carry are dropped.
std::string RenderJunit(const Report& report);

// "FILE:LINE" of an attribution row named "FUNCTION at FILE:LINE (MODULE+0xOFF)..." (as `watch`
// names call sites it could symbolise); nullopt when the name carries no line.
struct SourceLine {
  std::string file;
  int line = 0;
};
std::optional<SourceLine> SourceLineOf(std::string_view op);

// One `::error` workflow command per workload with a memory finding, on the source line of its
// top growing call site when it has one (a file below `workspace` is given relative to it, as
// GitHub expects). Each is a whole line, without the newline.
std::vector<std::string> GithubAnnotations(const Report& report, std::string_view workspace);

}  // namespace leakbound::reports
