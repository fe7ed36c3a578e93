// Markdown rendering of a Report, for CI logs and PR comments: run metadata, a summary table, a
// detection table (zoo: planted vs detected class; clean/trap: false positives) and, for every
// workload that did not pass or did not meet its expectation, its evidence, counter verdicts and
// what was still outstanding.
#pragma once

#include <string>
#include <string_view>

#include "leakbound/reports/format.h"  // FormatBytes and friends, shared with the HTML renderer
#include "leakbound/reports/report.h"

namespace leakbound::reports {

// GitHub-flavoured Markdown. Every string from the report is escaped (MarkdownEscape), so a
// workload name cannot break a table or inject HTML into a PR comment.
std::string RenderMarkdown(const Report& report);

// Text safe inside a GFM table cell: backslash-escapes | \ ` * [ ] < > and turns line breaks
// into spaces. Underscores are kept (GFM does not emphasise inside words: mlp_sgd stays readable).
std::string MarkdownEscape(std::string_view text);

}  // namespace leakbound::reports
