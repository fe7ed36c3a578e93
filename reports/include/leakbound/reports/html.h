// Self-contained HTML rendering of a Report: one file with inline CSS and inline SVG charts, no
// scripts and nothing fetched from the network, so it can be archived as a CI artifact and opened
// years later. Every string from the report is escaped: a report cannot inject markup.
#pragma once

#include <string>
#include <string_view>

#include "leakbound/reports/report.h"

namespace leakbound::reports {

// The whole page: run metadata, the summary table, then one card per workload with its verdict
// badge (green PASS, amber an expected zoo detection, red a missed expectation), evidence, one
// chart per counter series (chart.h) and its counter verdict and attribution tables.
std::string RenderHtml(const Report& report);

// Text safe in HTML element content and in quoted attribute values: & < > " ' are escaped.
std::string EscapeHtml(std::string_view text);

}  // namespace leakbound::reports
