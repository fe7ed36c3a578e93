// reports_render_sample DIR: writes the sample report (tests/sample_report.h) to DIR as
// report.json, report.md and report.html, for looking at the renderers' output by eye.

#include <cstdio>
#include <exception>
#include <filesystem>

#include "leakbound/reports/html.h"
#include "leakbound/reports/json.h"
#include "leakbound/reports/markdown.h"
#include "sample_report.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  namespace reports = leakbound::reports;
  try {
    const std::filesystem::path dir = argv[1];
    const reports::Report report = reports::testing::MakeSampleReport();
    reports::WriteReportAtomically(report, dir / "report.json");
    reports::WriteFileAtomically(dir / "report.md", reports::RenderMarkdown(report));
    reports::WriteFileAtomically(dir / "report.html", reports::RenderHtml(report));
    std::printf("wrote %s/report.{json,md,html}\n", dir.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "reports_render_sample: %s\n", error.what());
    return 1;
  }
  return 0;
}
