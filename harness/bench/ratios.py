#!/usr/bin/env python3
"""Ratio table of one bench_leakbound JSON run (Google Benchmark --benchmark_out), with the
targets of docs/bench.md and whether each was met. Standard library only.

Times are the median aggregate when the run had repetitions, else the single run. The memory
manager's fields (allocs_per_iter, max_bytes_used) come from MEMORY_JSON, a single-repetition
run: bench_leakbound registers its memory manager only then, because Google Benchmark 1.7.1
corrupts them with repetitions (google/benchmark#1939).

With --fail-above M, exit 1 when no target could be judged or a ratio row (the "<= N x" and
"< 1.01" targets) is over M times its target: a regression by a wide margin (the figures
themselves live in docs/bench.md; a shared machine moves them by tens of percent, not by M = 5).

Usage: ratios.py [--fail-above M] BENCH_JSON [MEMORY_JSON]   (a Markdown table; exit 2 if unreadable)
"""
import json
import math
import sys

TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
SHAPES = ("small", "medium", "large")
STEP_TARGET = {"small": 0.5, "medium": 1.0, "large": 1.0}
NODE_COUNTS = (1, 4, 16, 64, 256, 1024, 4096)
STACKS = ("host", "statistics", "tracking", "failing", "session")


def canonical(run_name):
    """'step/withstep/small/real_time' -> 'step/withstep/small' (drops run modifiers)."""
    parts = [p for p in run_name.split("/")
             if p not in ("real_time", "manual_time")
             and not p.startswith(("iterations:", "min_time:"))]
    return "/".join(parts)


class Run:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        self.context = data.get("context", {})
        self.runs = {}
        for b in data.get("benchmarks", []):
            entry = self.runs.setdefault(canonical(b["run_name"]), {})
            if b.get("run_type") == "aggregate":
                entry[b["aggregate_name"]] = b
            elif b.get("error_occurred"):
                entry["error"] = b.get("error_message", "error")
            else:
                last = entry.get("last")
                if last is None or b.get("repetition_index", 0) >= last.get("repetition_index", 0):
                    entry["last"] = b

    def _central(self, name):
        entry = self.runs.get(name, {})
        return entry.get("median") or entry.get("last")

    def time_ns(self, name):
        b = self._central(name)
        if b is None:
            return None
        return b["real_time"] * TO_NS[b.get("time_unit", "ns")]

    def counter(self, name, field):
        b = self._central(name)
        return None if b is None else b.get(field)

    def cv(self, name):
        """Relative spread of the time across repetitions (0 when unknown)."""
        entry = self.runs.get(name, {})
        if "cv" in entry:
            return entry["cv"]["real_time"]
        if "stddev" in entry and "mean" in entry and entry["mean"]["real_time"]:
            return entry["stddev"]["real_time"] / entry["mean"]["real_time"]
        return 0.0

    def memory(self, name, field):
        b = self.runs.get(name, {}).get("last")
        return None if b is None or "allocs_per_iter" not in b else b.get(field)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt_ns(ns):
    if ns is None:
        return "n/a"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt_bytes(n):
    if n is None:
        return "n/a"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def fmt(x, digits=3):
    return "n/a" if x is None else f"{x:.{digits}g}"


class Table:
    def __init__(self, margin=None):
        self.rows = []
        self.met = 0
        self.judged = 0
        self.margin = margin  # a ratio over margin x its limit is "far off" (--fail-above)
        self.far = []

    def section(self, title):
        self.rows.append(f"| **{title}** | | | |")

    def row(self, quantity, measured, target="", ok=None, ratio=None, limit=None):
        if ratio is not None and self.margin is not None and ratio > self.margin * limit:
            self.far.append(f"{quantity}: {ratio:.2f} against {target}")
        if ok is None:  # informational, or a target that could not be judged in this run
            verdict = "" if target in ("", "measured") else "n/a"
        else:
            self.judged += 1
            self.met += 1 if ok else 0
            verdict = "met" if ok else "**missed**"
        self.rows.append(f"| {quantity} | {measured} | {target} | {verdict} |")

    def render(self):
        head = ["| quantity | measured | target | verdict |", "|---|---|---|---|"]
        return "\n".join(head + self.rows)


def build(run, memory, margin=None):
    t = Table(margin)
    have_torch = not run.context.get("leakbound.peer", "").startswith("absent")

    t.section("step time, leakbound / libtorch (same MLP, SGD momentum 0.9, cross-entropy)")
    for kind, ours, theirs, paired in (
            ("train", "step/withstep", "torch/step", "torch/paired_step"),
            ("eval", "eval/withforward", "torch/eval", "torch/paired_eval")):
        for shape in SHAPES:
            target = f"<= {STEP_TARGET[shape]}"
            r = run.counter(f"{paired}/{shape}", "leakbound_over_torch")
            if r is None:
                why = "no libtorch peer in this build" if not have_torch else "not run"
                t.row(f"{kind} {shape}, paired", f"n/a ({why})", target)
            else:
                se = run.counter(f"{paired}/{shape}", "leakbound_over_torch_stderr") or 0.0
                t.row(f"{kind} {shape}, paired (alternating calls)",
                      f"{fmt_ns(run.counter(f'{paired}/{shape}', 'leakbound_ns'))} / "
                      f"{fmt_ns(run.counter(f'{paired}/{shape}', 'torch_ns'))} = {r:.2f} "
                      f"(stderr {se:.3f})", target, r <= STEP_TARGET[shape],
                      ratio=r, limit=STEP_TARGET[shape])
            a, b = run.time_ns(f"{ours}/{shape}"), run.time_ns(f"{theirs}/{shape}")
            if a is not None and b is not None:
                spread = max(run.cv(f"{ours}/{shape}"), run.cv(f"{theirs}/{shape}"))
                t.row(f"{kind} {shape}, separate runs, informational",
                      f"{fmt_ns(a)} / {fmt_ns(b)} = {a / b:.2f} (cv up to {100 * spread:.0f}%)")

    t.section("WithStep vs hand-written explicit release")
    for shape in SHAPES:
        paired = f"step/paired/{shape}"
        r = run.counter(paired, "withstep_over_explicit")
        se = run.counter(paired, "withstep_over_explicit_stderr") or 0.0
        if r is None:
            t.row(f"paired step ratio {shape}", "n/a (not run)", "1 within noise")
        else:
            band = max(0.02, 2 * (se or 0.0))
            t.row(f"paired step ratio {shape} (alternating steps)",
                  f"{fmt_ns(run.counter(paired, 'withstep_ns'))} / "
                  f"{fmt_ns(run.counter(paired, 'explicit_ns'))} = {r:.3f} (stderr {se:.3f})",
                  f"1 ± {band:.3f} (2 stderr, min 2%)", abs(r - 1) <= band)
        a, b = run.time_ns(f"step/withstep/{shape}"), run.time_ns(f"step/explicit/{shape}")
        ca, cb = run.cv(f"step/withstep/{shape}"), run.cv(f"step/explicit/{shape}")
        ea = run.counter(f"step/withstep/{shape}", "exit_ns")
        eb = run.counter(f"step/explicit/{shape}", "exit_ns")
        t.row(f"separate runs {shape}, informational",
              f"{fmt_ns(a)} (cv {100 * ca:.0f}%) / {fmt_ns(b)} (cv {100 * cb:.0f}%) = "
              f"{fmt(ratio(a, b))}; exit {fmt_ns(ea)} / reset {fmt_ns(eb)}")

    t.section("reclamation cost, % of the medium step")
    step = run.time_ns("step/withstep/medium")
    exit_ns = run.counter("step/withstep/medium", "exit_ns")
    pct = ratio(exit_ns, step)
    t.row("WithStep exit (timed alone) / step",
          "n/a" if pct is None else f"{fmt_ns(exit_ns)} / {fmt_ns(step)} = {100 * pct:.4f}%",
          "< 1%", None if pct is None else pct < 0.01)
    a = run.counter("step/paired/medium", "withstep_ns")
    b = run.counter("step/paired/medium", "explicit_ns")
    diff = ratio(None if a is None or b is None else a - b, b)
    t.row("(WithStep step - explicit step) / step, paired, informational",
          "n/a" if diff is None else f"{100 * diff:+.2f}% (within the pair noise above)")
    for shape in SHAPES:
        allocs = run.counter(f"step/withstep/{shape}", "allocs_per_step")
        growth = run.counter(f"step/noreclaim/{shape}", "growth_bytes_per_step")
        t.row(f"allocations per step / growth per step without reclamation, {shape}",
              f"{fmt(allocs)} / {fmt_bytes(growth)}")

    t.section("scope exit per node / bare free of the same sizes (HostResource), paired")
    for n in NODE_COUNTS:
        name = f"scope_exit/withstep/{n}"
        r = run.counter(name, "exit_over_bare")
        fwd = run.counter(f"scope_exit/withforward/{n}", "exit_over_bare")
        untracked = run.counter(f"scope_exit/withstep_untracked/{n}", "exit_over_bare")
        alone = run.counter(f"bare_free/{n}", "ns_per_free")
        if r is None:
            t.row(f"{n} nodes, WithStep", "n/a (not run)", "<= 1.5x")
            continue
        t.row(f"{n} nodes, WithStep",
              f"{fmt(run.counter(name, 'ns_per_node'))} ns / "
              f"{fmt(run.counter(name, 'bare_ns_per_free'))} ns = {r:.2f}x "
              f"(WithForward {fmt(fwd)}x, untracked {fmt(untracked)}x; "
              f"bare_free alone {fmt(alone)} ns)", "<= 1.5x", r <= 1.5, ratio=r, limit=1.5)

    t.section("probe sampling, % of the medium step")
    for probe in ("runtime", "tracking", "host", "all"):
        ns = run.time_ns(f"probe/{probe}")
        pct = ratio(ns, step)
        t.row(f"probe {probe}",
              "n/a" if pct is None else f"{fmt_ns(ns)} = {100 * pct:.4f}%",
              "< 1%", None if pct is None else pct < 0.01)

    t.section("allocate+free pair through each stack vs the bare host resource, paired")
    for size in (256, 65536):
        for stack in STACKS:
            name = f"alloc/{stack}/{size}"
            over = run.counter(name, "over_host")
            if over is None:
                t.row(f"{stack}, {size} B", "n/a (not run)")
                continue
            t.row(f"{stack}, {size} B",
                  f"{fmt(run.counter(name, 'ns_per_pair'))} ns vs "
                  f"{fmt(run.counter(name, 'host_ns_per_pair'))} ns per pair = {over:.2f}x host",
                  "measured")

    t.section("host-heap interposer (watch/heap), paired")
    for size in (16, 256, 4096):
        name = f"heap/malloc_free/{size}"
        over = run.counter(name, "over_glibc")
        if over is None:
            t.row(f"malloc+free {size} B, interposer / glibc", "n/a (not run)", "<= 1.3x")
            continue
        t.row(f"malloc+free {size} B, interposer / glibc",
              f"{fmt(run.counter(name, 'ns_per_pair'))} ns / "
              f"{fmt(run.counter(name, 'glibc_ns_per_pair'))} ns = {over:.2f}x", "<= 1.3x",
              over <= 1.3, ratio=over, limit=1.3)
    for shape in ("small", "medium"):
        name = f"heap/step/{shape}"
        r = run.counter(name, "counting_over_off")
        if r is None:
            t.row(f"step {shape}, counting / off", "n/a (not run)", "< 1.01")
            continue
        t.row(f"step {shape}, counting / off",
              f"{fmt_ns(run.counter(name, 'counting_ns'))} / "
              f"{fmt_ns(run.counter(name, 'off_ns'))} = {r:.4f} "
              f"(stderr {fmt(run.counter(name, 'counting_over_off_stderr'))})", "< 1.01", r < 1.01, ratio=r,
              limit=1.01)

    t.section("writing a trace's series (9 series; build, write, destroy), paired")
    for samples in (1500, 20000):
        name = f"reports/series/{samples}"
        r = run.counter(name, "packed_over_spelled")
        if r is None:
            t.row(f"{samples} samples, packed / spelled out", "n/a (not run)")
            continue
        t.row(f"{samples} samples, packed / spelled out",
              f"{fmt_ns(run.counter(name, 'packed_ns'))} / "
              f"{fmt_ns(run.counter(name, 'spelled_ns'))} = {r:.2f}x", "measured")

    t.section("peak bytes / analytic minimum (params + grads + momentum + live values)")
    for shape in SHAPES:
        name = f"step/withstep/{shape}"
        peak, minimum = run.counter(name, "peak_bytes"), run.counter(name, "min_bytes")
        r = run.counter(name, "peak_over_min")
        tp, tm = run.counter(name, "transient_peak_bytes"), run.counter(name, "transient_min_bytes")
        if r is None:
            t.row(f"{shape}", "n/a (not run)", "<= 1.05x")
            continue
        t.row(f"{shape}", f"{fmt_bytes(peak)} / {fmt_bytes(minimum)} = {r:.3f}x", "<= 1.05x",
              r <= 1.05, ratio=r, limit=1.05)
        t.row(f"{shape}, per-step values only, informational",
              f"{fmt_bytes(tp)} / {fmt_bytes(tm)} = {fmt(ratio(tp, tm))}x")

    t.section("memory manager (statistics adaptor, one-repetition pass, timed loop only)")
    names = [f"{family}/{shape}" for shape in SHAPES
             for family in ("step/withstep", "step/explicit", "step/noreclaim", "eval/withforward")]
    names += [f"probe/{probe}" for probe in ("runtime", "tracking", "host", "all")]
    for name in names:
        allocs = memory.memory(name, "allocs_per_iter") if memory else None
        if allocs is None:
            t.row(name, "n/a (no memory pass)")
            continue
        peak = memory.memory(name, "max_bytes_used")
        growth = memory.memory(name, "net_heap_growth")
        t.row(name, f"{fmt(allocs)} allocs/iter, peak above loop start {fmt_bytes(peak)}, "
                    f"net growth {fmt_bytes(growth)}")
    return t


def main(argv):
    margin = None
    if len(argv) > 2 and argv[1] == "--fail-above":
        try:
            margin = float(argv[2])
        except ValueError:
            margin = -1.0
        if not margin > 0:
            print(f"ratios.py: --fail-above takes a factor above 0, got '{argv[2]}'", file=sys.stderr)
            return 2
        argv = argv[:1] + argv[3:]
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    runs = []
    for path in argv[1:]:
        try:
            runs.append(Run(path))
        except (OSError, ValueError, KeyError) as e:
            print(f"ratios.py: cannot read {path}: {e}", file=sys.stderr)
            return 2
    run = runs[0]
    table = build(run, runs[1] if len(runs) > 1 else run, margin)
    ctx = run.context
    print(f"bench_leakbound {ctx.get('date', '?')} on {ctx.get('num_cpus', '?')} CPUs, "
          f"peer: {ctx.get('leakbound.peer', '?')}, threads: {ctx.get('leakbound.threads', '?')}, "
          f"OMP_WAIT_POLICY: {ctx.get('leakbound.omp_wait_policy', '?')}")
    print()
    print(table.render())
    print()
    print(f"targets met: {table.met} of {table.judged} judged")
    errors = [name for name, entry in run.runs.items() if "error" in entry]
    if errors:
        print(f"benchmarks that reported an error: {', '.join(sorted(errors))}")
    if margin is not None and (table.judged == 0 or table.far):
        why = "no target could be judged" if table.judged == 0 else "; ".join(table.far)
        print(f"ratios.py: --fail-above {margin:g}: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
