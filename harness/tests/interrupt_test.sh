#!/usr/bin/env bash
# Interruption contract: SIGINT (or SIGTERM) during `leakbound run` / `check` keeps every finished
# workload, writes the report marked interrupted (nothing half-written), prints one line saying
# so, and exits 130 (143). Needs the suite to poll SuiteOptions::stop between steps.
# Usage: interrupt_test.sh path/to/leakbound source_dir
set -u
lb=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Starts `leakbound ARGS...` in the background, sends SIGNAL after DELAY seconds, waits at most
# 30 s for it to end (a suite that does not poll `stop` runs on: it is killed, and that fails).
interrupt() {  # interrupt SIGNAL DELAY OUT_PREFIX -- args...
  local signal=$1 delay=$2 prefix=$3
  shift 4
  "$lb" "$@" >"$prefix.out" 2>"$prefix.err" &
  local pid=$!
  sleep "$delay"
  kill "-$signal" "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < 300)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    fail "leakbound $1 did not stop within 30 s of SIG$signal (does the suite poll SuiteOptions::stop?)"
    return 255
  fi
  wait "$pid"
}

# What an interrupted run leaves: report.json/.md/.html and trace.json, complete and marked.
check_left() {  # check_left DIR WHAT
  local dir=$1 what=$2
  for f in report.json report.md report.html trace.json; do
    [[ -s "$dir/$f" ]] || fail "$what: $f missing"
  done
  ls -a "$dir" | grep -q '\.tmp-' && fail "$what: a temporary file was left in $dir"
  python3 - "$dir/report.json" <<'PY' || fail "$what: report.json is not a complete interrupted report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["meta"].get("interrupted") is True, "meta.interrupted is not true"
assert len(r["workloads"]) < 26, "every workload finished: the signal came too late to test"
for w in r["workloads"]:
    planned = w["warmup_steps"] + w["blocks"] * w["steps_per_block"]
    assert w["blocks"] == len(w["block_ends"]), w["name"]
    for s in w["series"]:
        assert len(s["values"]) >= planned, (w["name"], s["name"], len(s["values"]), planned)
    assert w["verdict"] and w["evidence"], w["name"]
PY
  grep -q "INTERRUPTED" "$dir/report.md" || fail "$what: report.md has no INTERRUPTED banner"
  grep -q "result interrupted" "$dir/report.html" || fail "$what: report.html has no banner"
}

interrupt INT 1.5 "$tmp/run" -- run --all --steps 2000 --out "$tmp/r" -q
rc=$?
[[ $rc -eq 130 ]] || fail "run after SIGINT exited $rc, expected 130"
[[ $(grep -c "interrupted by SIGINT" "$tmp/run.out") -eq 1 ]] ||
  fail "run did not print one line saying it was interrupted: $(cat "$tmp/run.out")"
check_left "$tmp/r" "run after SIGINT"
echo "run after SIGINT: exit $rc, $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["workloads"]))' "$tmp/r/report.json" 2>/dev/null) workloads kept"

# An interrupted report renders and diffs: the workloads it lacks are "not run" regressions.
"$lb" render "$tmp/r/report.json" --markdown >/dev/null || fail "render of the interrupted report failed"

interrupt TERM 1.5 "$tmp/check" -- check --baselines "$src/baselines/cpu" --steps 2000 --out "$tmp/c" -q
rc=$?
[[ $rc -eq 143 ]] || fail "check after SIGTERM exited $rc, expected 143"
grep -q "interrupted by SIGTERM" "$tmp/check.out" || fail "check did not say it was interrupted"
if [[ -s "$tmp/c/diff.md" ]]; then
  head -1 "$tmp/c/diff.md" | grep -q '^\*\*REGRESSION\*\*' || fail "diff.md of an interrupted check opens with: $(head -1 "$tmp/c/diff.md")"
  grep -q "not run" "$tmp/c/diff.md" || fail "diff.md does not say which workloads were not run"
else
  fail "check after SIGTERM wrote no diff.md"
fi

echo "interrupt_test: $failures failures"
exit $((failures > 0))
