#!/usr/bin/env bash
# One `leakbound watch` case of the NVTX / CUDA injections per call (watch/tests/CMakeLists.txt):
# runs the program under watch and asserts the exit code, verdicts, probe states and notes from
# report.json / trace.json. Paths come from the environment set by ctest (LEAKBOUND_CLI,
# NVTX_STEPS, NVTX_INJECT, FAKE_CUDA, STUB_CUPTI, CUDA_INJECT, CUDA_MALLOC, WATCH_PROGRAMS).
# Usage: watch_device_test.sh CASE OUT_ROOT. Exit 77: skipped.
set -u
case_name=$1 out_root=$2
out=$out_root/$case_name
rm -rf "$out" "$out_root/$case_name".*
mkdir -p "$out_root"

fail() { echo "FAIL [$case_name]: $*" >&2; [ -f "$out/report.md" ] && sed -n '1,60p' "$out/report.md" >&2; exit 1; }

watch_expect() {  # RC ARGS...
  local want=$1; shift
  "$LEAKBOUND_CLI" watch --out "$out" "$@" >"$out_root/$case_name.stdout" 2>"$out_root/$case_name.stderr"
  local got=$?
  [ "$got" = "$want" ] || { cat "$out_root/$case_name.stdout" "$out_root/$case_name.stderr" >&2; fail "exit $got, want $want"; }
}

report_field() {
  python3 -c "import json; r=json.load(open('$out/report.json')); w=r['workloads'][0]; print($1)"
}
trace_field() {
  python3 -c "import json; t=json.load(open('$out/trace.json'))['traces'][0]; print($1)"
}
counter_verdict() { report_field "[c['verdict'] for c in w['counters'] if c['counter']=='$1'][0]"; }
counter_judged() { report_field "[c['judged'] for c in w['counters'] if c['counter']=='$1'][0]"; }
probe_state() { trace_field "[p['state'] for p in t['probes'] if p['name']=='$1'][0]"; }
last_value() { trace_field "[c['values'][-1] for c in t['counters'] if c['name']=='$1'][0]"; }

expect_verdict() {  # VERDICT [COUNTER VERDICT]...
  local verdict
  verdict=$(report_field "w['verdict']")
  [ "$verdict" = "$1" ] || fail "verdict $verdict, want $1"
  shift
  while [ $# -ge 2 ]; do
    local got
    got=$(counter_verdict "$1")
    [ "$got" = "$2" ] || fail "$1 is $got, want $2"
    shift 2
  done
}

expect_state() {  # PROBE PATTERN
  local state
  state=$(probe_state "$1")
  [[ "$state" == $2 ]] || fail "probe $1 is '$state', want '$2'"
}

fake_cuda() {  # RC MODE [watch flags...]
  local rc=$1 mode=$2; shift 2
  LEAKBOUND_CUPTI_LIBRARY=$STUB_CUPTI LEAKBOUND_CUDA_INJECTION=$CUDA_INJECT \
    watch_expect "$rc" "$@" -- "$FAKE_CUDA" "$mode" 120
}

case $case_name in
  nvtx_leak | nvtx_startend_leak)
    mode=leak; [ "$case_name" = nvtx_startend_leak ] && mode=leak-startend
    LEAKBOUND_NVTX_INJECTION=$NVTX_INJECT watch_expect 1 --step-range train_step -- "$NVTX_STEPS" $mode 200
    expect_verdict unbounded-growth host.heap_bytes unbounded-growth
    steps=$(trace_field "len(t['counters'][0]['values'])")
    [ "$steps" = 200 ] || fail "$steps steps arrived, want 200 (one per train_step range, none per nested range)"
    slope=$(report_field "[c['slope_per_step'] for c in w['counters'] if c['counter']=='host.heap_bytes'][0]")
    [ "$slope" = "24.0" ] || fail "host.heap_bytes slope $slope, want exactly 24.0 bytes/step"
    grep -q 'NVTX range \\"train_step\\" is a step' "$out/report.json" || fail "no step-range note in the report"
    ;;
  nvtx_clean | nvtx_startend_clean)
    mode=clean; [ "$case_name" = nvtx_startend_clean ] && mode=clean-startend
    LEAKBOUND_NVTX_INJECTION=$NVTX_INJECT watch_expect 0 --step-range train_step -- "$NVTX_STEPS" $mode 200
    expect_verdict PASS host.heap_bytes PASS
    steps=$(trace_field "len(t['counters'][0]['values'])")
    [ "$steps" = 200 ] || fail "$steps steps arrived, want 200"
    ;;
  nvtx_exports)
    nm -D --defined-only "$NVTX_INJECT" | grep -qw InitializeInjectionNvtx2 || fail "InitializeInjectionNvtx2 not exported"
    count=$(nm -D --defined-only "$NVTX_INJECT" | awk '$2 ~ /^[TD]$/' | wc -l)
    [ "$count" = 1 ] || fail "$count exported functions, want only InitializeInjectionNvtx2"
    ;;
  cuda_flat)
    fake_cuda 0 flat
    expect_verdict PASS cupti.device_bytes PASS host.heap_bytes PASS
    expect_state cupti active
    [ "$(last_value cupti.device_bytes)" = 4194304.0 ] || fail "cupti.device_bytes ends at $(last_value cupti.device_bytes), want the 4 MiB workspace"
    ;;
  cuda_leak)
    fake_cuda 1 leak
    expect_verdict unbounded-growth cupti.device_bytes unbounded-growth host.heap_bytes PASS
    expect_state cupti active
    slope=$(report_field "[c['slope_per_step'] for c in w['counters'] if c['counter']=='cupti.device_bytes'][0]")
    [ "$slope" = "4096.0" ] || fail "cupti.device_bytes slope $slope, want exactly 4096 bytes/step"
    grep -q 'allocator-bypass' "$out/report.json" || fail "the ledger classification (allocator-bypass) is missing"
    # Where: the cudaMalloc's call site (a CUPTI runtime-API callback on the allocating thread)
    # is the first growing row, role device, named by the program's line, at exactly 4096 B/step.
    line=$(grep -n 'device_malloc(0x20000000ull' "$WATCH_PROGRAMS/fake_cuda.c" | cut -d: -f1)
    report_field "w['attribution'][0]['op']" | grep -q "^main at .*fake_cuda.c:$line " || fail "the first row is not fake_cuda.c:$line"
    [ "$(report_field "w['attribution'][0]['role']")" = device ] || fail "the first row's role is not device"
    [ "$(report_field "w['attribution'][0]['census']")" = growth ] || fail "the first row's census is not growth"
    [ "$(report_field "w['attribution'][0]['bytes_per_step']")" = 4096.0 ] || fail "the first row's rate is not 4096 B/step"
    ;;
  cuda_pool_fragmentation)
    fake_cuda 1 pool
    expect_verdict pool-fragmentation cupti.pool_reserved_bytes pool-fragmentation cupti.pool_bytes PASS cupti.device_bytes PASS
    expect_state cupti active
    ;;
  cuda_held)
    LEAKBOUND_STUB_CUPTI_HELD="Nsight Systems" fake_cuda 0 flat
    expect_state cupti "unavailable: another CUPTI client already holds this process (Nsight Systems)*"
    [ "$(counter_judged cupti.device_bytes)" = False ] || fail "cupti.device_bytes judged while CUPTI was held by another client"
    expect_verdict PASS host.heap_bytes PASS
    ;;
  cuda_nvtx_is_cupti)
    NVTX_INJECTION64_PATH=/usr/local/cuda/lib64/libcupti.so fake_cuda 0 flat
    expect_state cupti "unavailable: NVTX_INJECTION64_PATH names libcupti*"
    [ "$(counter_judged cupti.device_bytes)" = False ] || fail "cupti.device_bytes judged although CUPTI was refused"
    expect_verdict PASS host.heap_bytes PASS
    ;;
  cuda_loaded_twice)
    copy=$out_root/$case_name.copy.so
    cp "$CUDA_INJECT" "$copy"
    FAKE_CUDA_SECOND_COPY=$copy fake_cuda 0 twice
    expect_state cupti active
    n=$(grep -o 'the second call did nothing' "$out/report.json" | wc -l)
    [ "$n" = 2 ] || fail "$n notes of a second InitializeInjection, want 2 (same library again, then a copy)"
    expect_verdict PASS cupti.device_bytes PASS
    ;;
  cuda_exports)
    nm -D --defined-only "$CUDA_INJECT" | grep -qw InitializeInjection || fail "InitializeInjection not exported"
    count=$(nm -D --defined-only "$CUDA_INJECT" | awk '$2 == "T"' | wc -l)
    [ "$count" = 1 ] || { nm -D --defined-only "$CUDA_INJECT" | awk '$2 == "T"' >&2; fail "$count exported functions, want only InitializeInjection"; }
    ;;
  cuda_no_driver)
    if [ -e /dev/nvidiactl ] && python3 -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2>/dev/null; then
      echo "SKIP: this machine has a CUDA driver (the case is for machines without one)"; exit 77
    fi
    LEAKBOUND_CUDA_INJECTION=$CUDA_INJECT watch_expect 0 -- "$CUDA_MALLOC" 100
    expect_state cupti "unavailable: the CUDA driver never loaded libleakbound_inject.so (no CUDA driver*CUPTI: unavailable: *"
    [ "$(counter_judged cupti.device_bytes)" = False ] || fail "cupti.device_bytes judged without a driver"
    expect_verdict PASS host.heap_bytes PASS
    ;;
  fake_torch_counters)
    # The Python module's framework counters, with a fake torch on PYTHONPATH whose caching
    # allocator "holds" 1 KiB more each step while allocated bytes stay flat.
    PYTHONPATH=$WATCH_PROGRAMS/fake_torch \
      watch_expect 1 -- python3 "$WATCH_PROGRAMS/fake_torch_steps.py" 120
    expect_verdict unbounded-growth torch.reserved_bytes unbounded-growth torch.allocated_bytes PASS host.heap_bytes PASS
    expect_state torch active
    [ "$(last_value torch.allocated_bytes)" = 1048576.0 ] || fail "torch.allocated_bytes ends at $(last_value torch.allocated_bytes), want 1048576"
    ;;
  *)
    echo "unknown case $case_name" >&2; exit 2 ;;
esac
echo "ok [$case_name]"
