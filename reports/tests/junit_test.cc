// Tests of the CI renderers: JUnit XML per workload (pass / failure / error, counts, escaping)
// and GitHub annotations on the source line of the top growing call site.
#include "leakbound/reports/junit.h"

#include <gtest/gtest.h>

#include <string>

#include "sample_report.h"

namespace leakbound::reports {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

WorkloadResult Watched(const std::string& name, VerdictClass verdict, const std::string& op) {
  WorkloadResult w = testing::MakeCleanWorkload(name);
  w.kind = "watched";
  w.verdict = verdict;
  w.evidence = "host.heap_bytes grew 24 B/step";
  if (verdict == kUnboundedGrowth) {
    CounterVerdict c;
    c.counter = "host.heap_bytes";
    c.verdict = kUnboundedGrowth;
    c.slope_per_step = 24;
    w.counters = {c};
  }
  if (!op.empty()) w.attribution = {Attribution{op, "heap", "none", 6912, 288, 0, 191}};
  return w;
}

TEST(JunitTest, OneTestCasePerWorkload_FailureCarriesClassRateAndSite) {
  Report report;
  report.meta = testing::MakeCpuMetadata();
  report.workloads = {
      Watched("clean", kPass, ""),
      Watched("leaky / DataLoader worker 1", kUnboundedGrowth,
              "main at src/loop.c:80 (loop+0x12fc)"),
      Watched("short", kInconclusive, "")};
  const std::string xml = RenderJunit(report);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", 0), 0u) << xml;
  EXPECT_TRUE(Contains(xml, "tests=\"3\" failures=\"1\" errors=\"1\"")) << xml;
  EXPECT_TRUE(Contains(xml, "<testcase classname=\"leakbound.watched\" name=\"clean\"/>")) << xml;
  EXPECT_TRUE(Contains(xml, "name=\"leaky / DataLoader worker 1\">\n      <failure "
                            "type=\"unbounded-growth\" message=\"unbounded-growth: "
                            "host.heap_bytes +24 B/step; top: main at src/loop.c:80"))
      << xml;
  EXPECT_TRUE(Contains(xml, "<error type=\"inconclusive\"")) << xml;
}

TEST(JunitTest, ZooEntryThatMissedItsExpectation_IsAFailure) {
  Report report;
  report.workloads = {testing::MakeMissedZooWorkload("zoo_missed"),
                      testing::MakeDetectedZooWorkload("zoo_caught")};
  const std::string xml = RenderJunit(report);
  EXPECT_TRUE(Contains(xml, "failures=\"1\"")) << xml;  // the planted leak found: a pass
  EXPECT_TRUE(Contains(xml, "name=\"zoo_caught\"/>")) << xml;
  EXPECT_TRUE(Contains(xml, "(expected not-returned-to-baseline)")) << xml;
}

TEST(JunitTest, HostileNames_AreEscapedAndControlCharactersDropped) {
  Report report;
  report.workloads = {Watched("a<b>&\"c'\x01", kUnboundedGrowth, "")};
  const std::string xml = RenderJunit(report);
  EXPECT_TRUE(Contains(xml, "name=\"a&lt;b&gt;&amp;&quot;c&apos;\"")) << xml;
  EXPECT_FALSE(Contains(xml, "\x01"));
}

TEST(JunitTest, SourceLineOf_ReadsFunctionAtFileLine) {
  const auto line = SourceLineOf("Remember at watch/tests/cpp_steps.cc:18 (cpp+0x14c3), "
                                 "allocating in std::_Rb_tree::_M_emplace_hint_unique (cpp+0x18f4)");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->file, "watch/tests/cpp_steps.cc");
  EXPECT_EQ(line->line, 18);
  EXPECT_FALSE(SourceLineOf("libtorch_cpu.so.1.13+0x317394a"));
  EXPECT_FALSE(SourceLineOf("main (loop+0x12fc)"));
  EXPECT_FALSE(SourceLineOf("main at loop.c:x1 (loop+0x1)"));
  EXPECT_FALSE(SourceLineOf("main at loop.c: (loop+0x1)"));
}

TEST(JunitTest, GithubAnnotations_OnTheLineBelowTheWorkspace_OnlyForFindings) {
  Report report;
  report.workloads = {Watched("clean", kPass, "main at /ws/src/a.c:3 (a+0x1)"),
                      Watched("py, rank 1: x", kUnboundedGrowth, "main at /ws/src/a.c:80 (a+0x1)"),
                      Watched("no line", kUnboundedGrowth, "libc.so.6+0x10")};
  const std::vector<std::string> lines = GithubAnnotations(report, "/ws");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("::error file=src/a.c,line=80,title=leakbound%3A py%2C rank 1%3A x "
                           "unbounded-growth::unbounded-growth: host.heap_bytes +24 B/step",
                           0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("::error title=", 0), 0u) << lines[1];
}

}  // namespace
}  // namespace leakbound::reports
