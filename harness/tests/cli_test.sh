#!/usr/bin/env bash
# CLI contract: exit codes (0 ok, 1 expectation/regression, 2 usage/input), files written
# atomically, nothing written on bad input, check against baselines passes and catches a
# planted regression. Usage: cli_test.sh path/to/leakbound source_dir
set -u
lb=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

expect() {  # expect CODE DESCRIPTION -- command...
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want"; sed 's/^/    /' "$tmp/err.txt" | tail -5
    # What stdout said about it (a regression list, missed expectations, the check summary).
    grep -E 'REGRESSION|^- |NOT met|expectation missed|^check:' "$tmp/out.txt" | head -20 | sed 's/^/    /'
    failures=$((failures + 1))
  else
    echo "ok:   $what (exit $got)"
  fi
}
expect_stderr() {  # the last command's stderr mentions a phrase
  if ! grep -qi -- "$1" "$tmp/err.txt"; then
    echo "FAIL: stderr lacks '$1':"; sed 's/^/    /' "$tmp/err.txt" | tail -3
    failures=$((failures + 1))
  fi
}

expect 0 "help" -- "$lb" --help
expect 0 "list" -- "$lb" list
grep -q "zoo_smallest_leak" "$tmp/out.txt" || { echo "FAIL: list lacks the zoo"; failures=$((failures + 1)); }
expect 2 "no subcommand" -- "$lb"
expect 2 "unknown subcommand" -- "$lb" frobnicate --all
expect_stderr "unknown subcommand 'frobnicate'; the subcommands are: list, run, diff, check, watch, render, judge"
expect 0 "run --help" -- "$lb" run --help
grep -q -- "--blocks.*\[2 - 1000\]" "$tmp/out.txt" || { echo "FAIL: run --help does not show the bounds of --blocks"; failures=$((failures + 1)); }
grep -q -- "--steps.*\[1 - 100000\]" "$tmp/out.txt" || { echo "FAIL: run --help does not show the bounds of --steps"; failures=$((failures + 1)); }
expect 2 "blocks past the upper bound" -- "$lb" run mlp_sgd --blocks 1001 --out "$tmp/a"
expect_stderr "1000"
expect 2 "blocks 0" -- "$lb" run mlp_sgd --blocks 0 --out "$tmp/a"
expect_stderr "blocks"
expect 2 "negative steps" -- "$lb" run mlp_sgd --steps -3 --out "$tmp/a"
expect 2 "overflowing steps" -- "$lb" run mlp_sgd --steps 99999999999999 --out "$tmp/a"
expect 2 "bad warm-up" -- "$lb" run mlp_sgd --warmup soon --out "$tmp/a"
expect_stderr "warmup"
expect 2 "bad device" -- "$lb" run mlp_sgd --device tpu --out "$tmp/a"
expect_stderr "device"
expect 2 "unknown workload" -- "$lb" run no_such --out "$tmp/a"
expect_stderr "known workloads"
expect 2 "neither names nor --all" -- "$lb" run --out "$tmp/a"
[[ -e "$tmp/a/report.json" ]] && { echo "FAIL: a report was written on bad input"; failures=$((failures + 1)); }
touch "$tmp/file"
expect 2 "output folder is a file" -- "$lb" run mlp_sgd --out "$tmp/file/sub" -q
# OpenBLAS is loaded when the CPU device is made: one that cannot be loaded is a usage error
# that says which library and what to do, and nothing is written.
LEAKBOUND_OPENBLAS=/nonexistent/libopenblas.so.0 \
  expect 2 "openblas missing" -- "$lb" run mlp_sgd --out "$tmp/noblas" -q
expect_stderr "needs OpenBLAS, which could not be loaded (/nonexistent/libopenblas.so.0"
expect_stderr "LEAKBOUND_OPENBLAS"
[[ -e "$tmp/noblas/report.json" ]] && { echo "FAIL: a run without OpenBLAS wrote a report"; failures=$((failures + 1)); }
expect 2 "cuda on a machine without one" -- "$lb" run mlp_sgd --device cuda --out "$tmp/c" -q
expect_stderr "cuda"
no_folder() {  # a refused command leaves no output folder behind
  [[ ! -e "$1" ]] || { echo "FAIL: $1 was left behind by a refused command"; failures=$((failures + 1)); }
}
expect 2 "a workload named twice" -- "$lb" run mlp_sgd mlp_sgd --out "$tmp/twice" -q
expect_stderr "named twice"
no_folder "$tmp/twice"
expect 2 "a block shorter than the documented minimum" -- "$lb" run mlp_sgd --blocks 4 --steps 1 --out "$tmp/short" -q
expect_stderr "pass --steps 4 or more"
no_folder "$tmp/short"
expect 2 "a block shorter than the workload's period" -- "$lb" run zoo_slow_leak --steps 5 --out "$tmp/short2" -q
expect_stderr "repeats every 7 steps.*pass --steps 7 or more"
no_folder "$tmp/short2"
expect 0 "the shortest accepted schedule" -- "$lb" run mlp_sgd zoo_slow_leak --blocks 2 --steps 7 --no-calibrate --out "$tmp/short3" -q
expect 2 "a CUDA-only workload on the CPU" -- "$lb" run zoo_cuda_raw_malloc_bypass --out "$tmp/cudaonly" -q
expect_stderr 'needs a CUDA device\|unknown workload'  # a build without CUDA has no GPU zoo
no_folder "$tmp/cudaonly"
expect 2 "a refused run under new nested folders" -- "$lb" run mlp_sgd mlp_sgd --out "$tmp/deep/a/b" -q
no_folder "$tmp/deep"
expect 2 "negative seed" -- "$lb" run mlp_sgd --seed -1 --out "$tmp/seed" -q
expect_stderr "seed"
expect 2 "seed past 2^64" -- "$lb" run mlp_sgd --seed 18446744073709551616 --out "$tmp/seed" -q
no_folder "$tmp/seed"

expect 0 "run a clean workload and a zoo entry" -- "$lb" run mlp_sgd zoo_smallest_leak --out "$tmp/r" -q
for f in report.json report.md report.html; do
  [[ -s "$tmp/r/$f" ]] || { echo "FAIL: $f missing"; failures=$((failures + 1)); }
done
ls "$tmp/r" | grep -q '\.tmp' && { echo "FAIL: temp file left behind"; failures=$((failures + 1)); }
grep -q "detection table" "$tmp/out.txt" || { echo "FAIL: run prints no detection table"; failures=$((failures + 1)); }

[[ -s "$tmp/r/trace.json" ]] || { echo "FAIL: run wrote no trace.json beside report.json"; failures=$((failures + 1)); }
expect 0 "judge re-judges the run's trace" -- "$lb" judge "$tmp/r/trace.json" --out "$tmp/judged"
grep -q "detection table" "$tmp/out.txt" || { echo "FAIL: judge prints no detection table"; failures=$((failures + 1)); }
python3 - "$tmp/r/report.json" "$tmp/judged/report.json" <<'PY' || { echo "FAIL: judge's verdicts differ from run's"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
va = [(w["name"], w["verdict"], w["met_expectation"]) for w in a["workloads"]]
vb = [(w["name"], w["verdict"], w["met_expectation"]) for w in b["workloads"]]
assert va == vb, (va, vb)
PY
expect 0 "run --all" -- "$lb" run --all --out "$tmp/all" -q
# Exit 3, an internal error: a fault injected while the report is rendered (tests only). The
# folder keeps the previous run's report set, every file as it was.
expect 0 "run into a folder" -- "$lb" run mlp_sgd --out "$tmp/fault" -q
before=$(cd "$tmp/fault" && md5sum report.json report.md report.html trace.json 2>/dev/null)
expect 3 "an internal error while rendering" -- env LEAKBOUND_TEST_FAULT=render "$lb" run mlp_sgd --out "$tmp/fault" -q
grep -q "leakbound: internal error: a fault injected" "$tmp/err.txt" || { echo "FAIL: exit 3 without its message"; failures=$((failures + 1)); }
[[ "$(cd "$tmp/fault" && md5sum report.json report.md report.html trace.json 2>/dev/null)" == "$before" ]] || { echo "FAIL: an internal error changed the previous report set"; failures=$((failures + 1)); }
ls "$tmp/fault" | grep -q '\.tmp' && { echo "FAIL: temp file left behind after exit 3"; failures=$((failures + 1)); }
# Exit 1 from a run's verdicts (judge exits like run): a clean workload's trace labelled as a zoo
# entry expecting growth is a missed entry; a zoo entry's trace labelled clean is a leak where none
# was expected. Both come from the same summary as run's exit code.
python3 - "$tmp/all/trace.json" "$tmp/missed.json" "$tmp/unexpected.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
def one(name, kind, expectation, path):
    d = dict(run)
    d["traces"] = [t for t in run["traces"] if t["subject"]["name"] == name]
    d["traces"][0]["subject"].update(kind=kind, expectation=expectation)
    json.dump(d, open(path, "w"))
one("mlp_sgd", "zoo", "unbounded-growth", sys.argv[2])
one("zoo_unreachable_buffer", "clean", "PASS", sys.argv[3])
PY
expect 1 "a zoo entry judged PASS is missed" -- "$lb" judge "$tmp/missed.json"
grep -q "mlp_sgd" "$tmp/out.txt" || { echo "FAIL: the missed entry is not named"; failures=$((failures + 1)); }
expect 1 "a clean workload judged growing is a leak where none was expected" -- "$lb" judge "$tmp/unexpected.json"
expect 0 "judge re-judges the trace of run --all" -- "$lb" judge "$tmp/all/trace.json" --out "$tmp/all_judged"
python3 - "$tmp/all/report.json" "$tmp/all_judged/report.json" <<'PY' || { echo "FAIL: judge's verdicts differ from run --all's"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
va = [(w["name"], w["verdict"], w["met_expectation"], w["evidence"]) for w in a["workloads"]]
vb = [(w["name"], w["verdict"], w["met_expectation"], w["evidence"]) for w in b["workloads"]]
assert len(va) >= 20 and va == vb, (va, vb)
PY
expect 0 "run --trace FILE writes the trace there too" -- "$lb" run mlp_sgd --out "$tmp/rt" --trace "$tmp/extra_trace.json" -q
[[ -s "$tmp/extra_trace.json" && -s "$tmp/rt/trace.json" ]] || { echo "FAIL: --trace FILE or trace.json missing"; failures=$((failures + 1)); }
echo '{"not": "a trace"}' >"$tmp/bad_trace.json"
expect 2 "judge a file that is not a trace" -- "$lb" judge "$tmp/bad_trace.json"
expect 2 "judge a folder" -- "$lb" judge "$tmp/r"
expect_stderr "is a folder"
expect 2 "render a folder" -- "$lb" render "$tmp/r" --html
expect_stderr "$tmp/r is a folder; pass the report file inside it, e.g. $tmp/r/report.json"
expect 2 "render --out a folder" -- "$lb" render "$tmp/r/report.json" --html --out "$tmp/r"
expect_stderr "is a folder; name the file to write"
python3 - "$tmp/r/report.json" "$tmp/negative.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["workloads"][0]["steady_live_bytes"] = -4096
json.dump(r, open(sys.argv[2], "w"))
PY
expect 2 "a negative steady_live_bytes is refused" -- "$lb" render "$tmp/negative.json" --markdown
expect_stderr 'steady_live_bytes` is out of range, expected a non-negative number'
expect 0 "render html" -- "$lb" render "$tmp/r/report.json" --html --out "$tmp/r/again.html"
grep -q "<svg" "$tmp/r/again.html" || { echo "FAIL: html has no chart"; failures=$((failures + 1)); }
expect 2 "render needs one format" -- "$lb" render "$tmp/r/report.json"
expect 0 "render picks Markdown from --out's extension" -- "$lb" render "$tmp/r/report.json" --out "$tmp/by_ext.md"
grep -q "^# leakbound report" "$tmp/by_ext.md" || { echo "FAIL: by_ext.md is not Markdown"; failures=$((failures + 1)); }
expect 0 "list --json is JSON with descriptions" -- "$lb" list --json
python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); assert l and all(w["description"] and isinstance(w["needs_cuda"], bool) for w in l)' "$tmp/out.txt" \
  || { echo "FAIL: list --json is not the JSON expected"; failures=$((failures + 1)); }
head -c 200 "$tmp/r/report.json" >"$tmp/truncated.json"
expect 2 "render a truncated report" -- "$lb" render "$tmp/truncated.json" --markdown
echo "not json" >"$tmp/bad.json"
expect 2 "render a malformed report" -- "$lb" render "$tmp/bad.json" --markdown
sed 's/"schema_version": *1/"schema_version": 99/' "$tmp/r/report.json" >"$tmp/v99.json"
expect 2 "render a future schema version" -- "$lb" render "$tmp/v99.json" --markdown
expect_stderr "schema"

expect 0 "diff a report with itself" -- "$lb" diff "$tmp/r/report.json" "$tmp/r/report.json"
python3 - "$tmp/r/report.json" "$tmp/regressed.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for w in r["workloads"]:
    if w["name"] == "mlp_sgd":
        w["peak_bytes"] *= 1.25
        w["steady_live_bytes"] *= 1.25
json.dump(r, open(sys.argv[2], "w"))
PY
expect 1 "diff catches a planted +25% regression" -- "$lb" diff "$tmp/r/report.json" "$tmp/regressed.json"
expect 2 "diff a missing file" -- "$lb" diff "$tmp/nope.json" "$tmp/r/report.json"
expect 2 "diff tolerance out of range" -- "$lb" diff "$tmp/r/report.json" "$tmp/r/report.json" --tolerance -1

if [[ -d "$src/baselines/cpu" ]] && ls "$src/baselines/cpu"/*.json >/dev/null 2>&1; then
  expect 0 "check passes on the committed baselines" -- "$lb" check --baselines "$src/baselines/cpu" --out "$tmp/check" -q
  mkdir -p "$tmp/planted"
  cp "$src/baselines/cpu"/*.json "$tmp/planted/"
  python3 - "$tmp/planted/mlp_adam.json" <<'PY'
import json, sys
p = sys.argv[1]
r = json.load(open(p))
for w in r["workloads"]:
    w["steady_live_bytes"] *= 0.8   # the baseline kept 20% less: the fresh run regressed
    w["peak_bytes"] *= 0.8
json.dump(r, open(p, "w"))
PY
  mkdir -p "$tmp/only_sgd"
  cp "$src/baselines/cpu/mlp_sgd.json" "$tmp/only_sgd/"
  expect 1 "check with one baseline fails: the other clean workloads are unguarded" -- "$lb" check --baselines "$tmp/only_sgd" --out "$tmp/check1" -q
  grep -q "mlp_adam | baseline | none .*Not checked (fails the check)" "$tmp/check1/diff.md" || { echo "FAIL: diff.md does not say mlp_adam went unchecked"; failures=$((failures + 1)); }
  grep -q "step time shown, not compared" "$tmp/check1/diff.md" || { echo "FAIL: diff.md does not say step time is not compared"; failures=$((failures + 1)); }
  expect 2 "check --baselines names a file" -- "$lb" check --baselines "$tmp/only_sgd/mlp_sgd.json" --out "$tmp/check3" -q
  expect_stderr "is a file"
  expect 1 "check fails on a planted regression" -- "$lb" check --baselines "$tmp/planted" --out "$tmp/check2" -q
  grep -q "mlp_adam" "$tmp/check2/diff.md" || { echo "FAIL: diff.md does not name mlp_adam"; failures=$((failures + 1)); }
  # One document whose first line is the verdict over every baseline: a regression in the second
  # baseline file (sorted: eval_inside_train.json) is named there, never an "OK" first.
  mkdir -p "$tmp/planted2"
  cp "$src/baselines/cpu"/*.json "$tmp/planted2/"
  python3 - "$tmp/planted2/eval_inside_train.json" <<'PY'
import json, sys
p = sys.argv[1]
r = json.load(open(p))
for w in r["workloads"]:
    w["steady_live_bytes"] *= 0.8
json.dump(r, open(p, "w"))
PY
  expect 1 "check fails on a regression in the second baseline" -- "$lb" check --baselines "$tmp/planted2" --out "$tmp/check4" -q
  head -1 "$tmp/check4/diff.md" | grep -q '^\*\*REGRESSION\*\*: 1 regression in eval_inside_train (steady live), ' \
    || { echo "FAIL: diff.md line 1 does not name the regression: $(head -1 "$tmp/check4/diff.md")"; failures=$((failures + 1)); }
  [[ $(grep -c '^\*\*OK\*\*\|^\*\*REGRESSION\*\*' "$tmp/check4/diff.md") -eq 1 ]] \
    || { echo "FAIL: diff.md has more than one verdict line"; failures=$((failures + 1)); }
  head -1 "$tmp/check1/diff.md" | grep -q '^\*\*FAIL\*\*: 0 regressions, 8 clean workloads without a baseline' \
    || { echo "FAIL: diff.md line 1 does not count the unbaselined workloads: $(head -1 "$tmp/check1/diff.md")"; failures=$((failures + 1)); }
else
  echo "FAIL: no baselines in $src/baselines/cpu"; failures=$((failures + 1))
fi

echo "cli_test: $failures failures"
exit $((failures > 0))
