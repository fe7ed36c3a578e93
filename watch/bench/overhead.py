#!/usr/bin/env python3
"""Paired, alternating overhead runs for watch/bench/overhead.sh (docs/watch.md, "Overhead").

Each program is run ROUNDS times in every variant (bare, under watch in its settings, under
heaptrack and memray where they apply); a round runs every variant once, one after another, its
first variant rotating from round to round, so that a slow stretch of a shared machine falls on
all of them. Reported per variant: the median wall time and its range, the median of the paired
ratios (this round's run over this round's bare run) with their range, the fastest run over bare's
fastest (a shared machine's interference only ever adds time, so the fastest runs are the least
disturbed: a second reading, not a replacement for the medians), an interval for the median of
the paired ratios (distribution-free: between two of the sorted ratios, chosen from the binomial
distribution so that it holds the true median with at least 95% probability whatever the
host's noise looks like; up to 8 rounds it is the whole range, 94% sure with 5 and 98% with 7,
and 9 or more narrow it), and the
median peak RSS
of the program itself against bare's: under watch the program's own (watch prints its ru_maxrss on stderr:
"peak RSS ... MiB"), elsewhere what /usr/bin/time says (ru_maxrss of the process it started,
which is the largest process of a heaptrack or memray run). Every variant runs under
/usr/bin/time, so that none pays for a launcher the others do not. Not ru_maxrss from this
script's own wait4: a child started from Python counts Python's resident pages before its exec
(13 MiB), which was the bare malloc loop's "peak RSS" until 2026-12-06, and under watch the
watcher's (29 MiB against the program's 2 MiB).

Last, the overhead issue's goals (malloc loop <= 1.5x without call sites and <= 2x with them,
PyTorch training <= 1.10x, peak RSS <= +10%), each read off that interval: met when all of it is
at or under the goal, not met when all of it is above, unresolved when the host's spread
straddles the goal (more rounds narrow it).

With the malloc loop, and valgrind installed, the loop's instructions a pair under bare, the
reference preloads and watch are counted too (callgrind, 1M pairs): figures that a loaded machine
does not move.

Usage: overhead.py --leakbound PATH --malloc-loop PATH --malloc-threads PATH --programs DIR
                   [--rounds N] [--pairs N] [--torch-steps N] [--loader-steps N]
                   [--memray-python PATH | --memray-skip REASON] [--only NAMES] [--out FILE]
                   [--no-heaptrack] [--no-instructions] [--fail-above RATIO]
Exit status: 0; 1 when a program failed under a variant, or (--fail-above) when a watch
variant's median paired ratio is above RATIO (the bench.watch_overhead smoke test: a wide
margin, for regressions only; the figures themselves live in docs/watch.md).
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


PEAK_RSS = re.compile(rb"peak RSS ([0-9.]+) MiB")
TIME = "/usr/bin/time"


def run_once(argv, env, scratch):
    """Wall seconds, the program's peak RSS in KiB (0: unknown) and the exit status of one run."""
    rss_file = os.path.join(scratch, "rss")
    if os.path.exists(rss_file):
        os.remove(rss_file)  # a run that writes none must not read the last one's
    watched = len(argv) > 1 and argv[1] == "watch"
    start = time.monotonic()
    child = subprocess.run([TIME, "-f", "%M", "-o", rss_file] + argv, env=env,
                           stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE if watched else subprocess.DEVNULL)
    wall = time.monotonic() - start
    rss = 0
    if watched:
        found = PEAK_RSS.search(child.stderr or b"")  # watch's report goes to stderr
        rss = round(float(found.group(1)) * 1024) if found else 0
    else:
        try:
            rss = int(open(rss_file).read().split()[-1])
        except (OSError, ValueError, IndexError):
            rss = 0
    return wall, rss, child.returncode


class Variant:
    def __init__(self, label, argv, env=None, ok=(0,)):
        self.label, self.argv, self.env, self.ok = label, argv, env or {}, ok
        self.walls, self.rss, self.failure = [], [], None


def measure(title, variants, rounds, log, scratch):
    """Runs the variants alternately; variants[0] is bare."""
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            if v.failure:
                continue
            try:
                wall, rss, rc = run_once(v.argv, {**os.environ, **v.env}, scratch)
            except OSError as error:
                v.failure = "cannot run %s: %s" % (v.argv[0], error.strerror)
                log("  %s: %s: FAILED, %s" % (title, v.label, v.failure))
                continue
            if rc not in v.ok:
                v.failure = "exit %d%s (command: %s)" % (
                    rc, ": not found or not executable" if rc in (126, 127) else "",
                    " ".join(v.argv))
                log("  %s: %s: FAILED, %s" % (title, v.label, v.failure))
                continue
            v.walls.append(wall)
            v.rss.append(rss)
            log("  round %d/%d  %-44s %7.3f s  %7.1f MiB" % (r + 1, rounds, v.label, wall,
                                                               rss / 1024))


INSTRUCTION_PAIRS = 1000000
SUMMARY = re.compile(r"^(?:summary|totals):\s*(\d+)", re.M)


def loop_instructions(variants, scratch, log):
    """callgrind's count of the malloc loop's own instructions a pair (INSTRUCTION_PAIRS pairs)
    under each variant: the same on any machine, loaded or not, where wall times move by a third
    from one run to the next. Under watch, valgrind follows the watcher's children and the
    loop's own process is counted (the watcher runs beside it on another core). Returns table
    lines."""
    lines = ["", "**malloc/free loop, %d M pairs: instructions a pair (callgrind, the loop's "
             "process: its code, glibc's malloc and the hooks)**" % (INSTRUCTION_PAIRS // 1000000),
             "", "| | instructions a pair | x bare |", "|---|---:|---:|"]
    bare = None
    for v in variants:
        folder = tempfile.mkdtemp(prefix="cg-", dir=scratch)
        argv = v.argv[:-1] + [str(INSTRUCTION_PAIRS)]  # the loop's argument: its pairs
        program = argv[argv.index("--") + 1] if "--" in argv else argv[0]
        child = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                                "--callgrind-out-file=%s/cg.%%p" % folder] + argv,
                               env={**os.environ, **v.env}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        count = None
        for name in sorted(os.listdir(folder)):
            text = open(os.path.join(folder, name), errors="replace").read(65536)
            if re.search(r"^cmd:\s+%s\b" % re.escape(program), text, re.M):
                found = SUMMARY.search(text)
                count = int(found.group(1)) / INSTRUCTION_PAIRS if found else None
                break
        if count is None:
            lines.append("| %s | failed (exit %d, no count of %s) | |" % (
                v.label, child.returncode, os.path.basename(program)))
            continue
        if bare is None:
            bare = count
        lines.append("| %s | %.1f | %.2fx |" % (v.label, count, count / bare))
        log("  instructions  %-44s %7.1f a pair" % (v.label, count))
    return lines


def worst_watch_ratio(variants):
    bare, worst = variants[0], None
    for v in variants:
        if v.label.startswith("watch") and v.walls and bare.walls:
            ratio = statistics.median([w / b for w, b in zip(v.walls, bare.walls)])
            if worst is None or ratio > worst[0]:
                worst = (ratio, v.label)
    return worst


def median_interval(values, confidence=0.95):
    """A distribution-free interval for the median of values: (low, high, coverage), the k-th
    smallest and the k-th largest of them for the largest k whose coverage (the probability that
    the true median lies between them, from the binomial distribution with p = 1/2) is still at
    least `confidence`; the whole range (k = 1) when no k reaches it. Needs no assumption on the
    shape of the host's noise, only that the paired runs are independent."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return None
    tail = lambda k: sum(math.comb(n, i) for i in range(k)) / 2.0 ** n  # P(X <= k - 1)
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * tail(k + 1) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], 1 - 2 * tail(k)


def paired_ratios(v, bare):
    return [w / b for w, b in zip(v.walls, bare.walls)]


def table(title, variants):
    bare = variants[0]
    lines = ["", "**%s**" % title, "",
             "| | wall, median (range) | x bare, median of pairs (range) | the median's interval "
             "| fastest x bare's fastest | peak RSS | RSS x bare |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for v in variants:
        if v.failure or not v.walls or not bare.walls:
            lines.append("| %s | failed: %s | | | | | |" % (
                v.label, v.failure or ("no run" if not v.walls else "no bare run to compare")))
            continue
        pairs = paired_ratios(v, bare)
        low, high, coverage = median_interval(pairs)
        rss, bare_rss = statistics.median(v.rss), statistics.median(bare.rss)
        lines.append("| %s | %.3f s (%.3f-%.3f) | %.2fx (%.2f-%.2f) | %.2f-%.2fx (%.0f%%) | %.2fx "
                     "| %s | %s |" % (
            v.label, statistics.median(v.walls), min(v.walls), max(v.walls),
            statistics.median(pairs), min(pairs), max(pairs), low, high, 100 * coverage,
            min(v.walls) / min(bare.walls),
            "%.1f MiB" % (rss / 1024) if rss else "unknown",
            "%.2fx" % (rss / bare_rss) if rss and bare_rss else "-"))
    return lines


# The overhead issue's goals: (program key, variant label, what, the goal as a ratio to bare).
GOALS = [("malloc", "watch, call sites off", "time", 1.5),
         ("malloc", "watch, call sites on", "time", 2.0),
         ("torch", "watch, call sites on", "time", 1.10),
         ("torch", "watch, call sites on, LEAKBOUND_CENSUS_GC=0 (the collector as bare)", "time",
          1.10),
         ("torch", "watch, call sites on", "peak RSS", 1.10)]


def goal_verdict(low, high, goal, coverage=1.0):
    if coverage < 0.95:
        return "unresolved (%d%% sure only: 9 rounds or more give 95%%)" % (100 * coverage)
    if high <= goal:
        return "met"
    if low > goal:
        return "not met"
    return "unresolved (the interval straddles the goal: more rounds)"


def goals_table(measured):
    """The goals' lines: measured maps a program key to its variants (variants[0] bare)."""
    lines = ["", "**The overhead issue's goals, read off the intervals above** (time: the median "
             "paired ratio's interval; peak RSS: its median against bare's, which the host's load "
             "does not move)", "", "| goal | variant | reading | verdict |", "|---|---|---:|---|"]
    for key, label, what, goal in GOALS:
        variants = measured.get(key)
        found = [v for v in variants or [] if v.label == label]
        if not found or found[0].failure or not found[0].walls or not variants[0].walls:
            continue
        v, bare = found[0], variants[0]
        name = {"malloc": "malloc loop", "torch": "PyTorch MLP"}[key]
        if what == "time":
            low, high, coverage = median_interval(paired_ratios(v, bare))
            reading = "%.2f-%.2fx (%.0f%%)" % (low, high, 100 * coverage)
        else:
            coverage = 1.0  # a peak RSS is not noise-bound: its median against bare's
            rss, bare_rss = statistics.median(v.rss), statistics.median(bare.rss)
            if not rss or not bare_rss:
                continue
            low = high = rss / bare_rss
            reading = "%.3fx" % low
        lines.append("| %s %s <= %.2fx | %s | %s | %s |" % (name, what, goal, label, reading,
                                                          goal_verdict(low, high, goal,
                                                                       coverage)))
    return lines if len(lines) > 5 else []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leakbound", required=True)
    parser.add_argument("--malloc-loop", required=True)
    parser.add_argument("--malloc-threads", required=True)
    parser.add_argument("--programs", required=True, help="watch/tests/programs")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=20000000)
    parser.add_argument("--torch-steps", type=int, default=1500)
    parser.add_argument("--loader-steps", type=int, default=600)
    parser.add_argument("--exact-counter", help="the reference exact counter (exact_counter.c "
                        "built as a shared object), LD_PRELOADed as a variant of its own")
    parser.add_argument("--forward-only", help="exact_counter.c built with -DFORWARD_ONLY: an "
                        "LD_PRELOAD that only forwards (the floor of any interposer)")
    parser.add_argument("--exact-header", help="exact_counter.c built with -DFROM_HEADER: the "
                        "exact counter reading glibc's chunk header (the cheapest)")
    parser.add_argument("--memray-python", help="a python that imports memray and torch")
    parser.add_argument("--memray-skip", default="no --memray-python given")
    parser.add_argument("--only", default="malloc,threads,torch,lines,loader",
                        help="comma-separated programs to run")
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument("--no-heaptrack", action="store_true", help="leave heaptrack out")
    parser.add_argument("--no-instructions", action="store_true",
                        help="leave out the malloc loop's instructions a pair (callgrind)")
    parser.add_argument("--fail-above", type=float, metavar="RATIO",
                        help="exit 1 when a watch variant's median paired ratio is above RATIO")
    args = parser.parse_args()
    if args.rounds < 1 or args.pairs < 1 or args.torch_steps < 1 or args.loader_steps < 1:
        parser.error("--rounds, --pairs, --torch-steps and --loader-steps must be >= 1")

    if not os.access(TIME, os.X_OK):
        parser.error("%s is needed (each run's peak RSS): apt-get install time "
                     "(bash ci/install_deps.sh installs it)" % TIME)
    only = set(args.only.split(","))
    unknown = only - {"malloc", "threads", "torch", "lines", "loader"}
    if unknown:
        parser.error("--only: unknown program(s) %s" % ", ".join(sorted(unknown)))
    if only & {"torch", "lines", "loader"} and not os.access(args.python, os.X_OK):
        parser.error("--python %s: not an executable" % args.python)
    log = lambda text: print(text, file=sys.stderr, flush=True)
    scratch = tempfile.mkdtemp(prefix="leakbound-overhead-")
    watch = lambda *opts: [args.leakbound, "watch", "--out", os.path.join(scratch, "w")] + list(opts) + ["--"]
    watch_ok = (0, 4)  # the loops have no truth to meet: a PASS or too few steps
    heaptrack = None if args.no_heaptrack else shutil.which("heaptrack")
    heaptrack_cmd = lambda: [heaptrack, "-o", os.path.join(scratch, "ht")]
    notes, lines = [], []

    def exact(cmd, env=None):
        """The reference preloads' variants of cmd: forwarding only, the exact counter."""
        refs = [("LD_PRELOAD that only forwards (the floor of any interposer)", args.forward_only),
                ("exact counter (LD_PRELOAD, malloc_usable_size per thread, no records)",
                 args.exact_counter),
                ("exact counter from glibc's chunk header (LD_PRELOAD, per thread, no records)",
                 args.exact_header)]
        return [Variant(label, cmd, env=dict(env or {}, LD_PRELOAD=so)) for label, so in refs if so]
    if not heaptrack and not args.no_heaptrack:
        notes.append("heaptrack: skipped (not installed; apt-get install heaptrack)")
    if not args.memray_python:
        notes.append("memray: skipped (%s)" % args.memray_skip)
    has_torch = bool(only & {"torch", "lines", "loader"}) and subprocess.run(
        [args.python, "-c", "import torch"], capture_output=True).returncode == 0
    if not has_torch and only & {"torch", "lines", "loader"}:
        notes.append("PyTorch programs: skipped (%s cannot import torch; apt-get install "
                     "python3-torch)" % args.python)
        only -= {"torch", "lines", "loader"}

    programs = []
    loop = [args.malloc_loop, str(args.pairs)]
    if "malloc" in only:
        variants = [Variant("bare", loop)] + exact(loop) + [
            Variant("watch, call sites off", watch("--no-call-sites") + loop, ok=watch_ok),
            Variant("watch, call sites on", watch() + loop, ok=watch_ok)]
        if heaptrack:
            variants.append(Variant("heaptrack", heaptrack_cmd() + loop))
        programs.append(("malloc", "malloc/free loop, %g M pairs, a step marker per 1,000 pairs"
                         % (args.pairs / 1e6), variants))
    threads = [args.malloc_threads, str(args.pairs)]
    if "threads" in only:
        variants = [Variant("bare", threads)] + exact(threads) + [
            Variant("watch --interval 20ms, call sites off",
                    watch("--interval", "20ms", "--no-call-sites") + threads, ok=watch_ok),
            Variant("watch --interval 20ms, call sites on",
                    watch("--interval", "20ms") + threads, ok=watch_ok)]
        if heaptrack:
            variants.append(Variant("heaptrack", heaptrack_cmd() + threads))
        programs.append(("threads", "malloc/free loop, 4 threads, %g M pairs in all, no markers"
                         % (args.pairs / 1e6), variants))
    mlp = os.path.join(args.programs, "torch_mlp.py")
    step_on = ["--step-on", "torch.optim.SGD.step"]
    if "torch" in only:
        train = [args.python, mlp, "clean", "step_on", str(args.torch_steps)]
        variants = [Variant("bare", train),
                    Variant("bare, PYTHONMALLOC=malloc", train, env={"PYTHONMALLOC": "malloc"})]
        variants += exact(train, {"PYTHONMALLOC": "malloc"})
        variants += [
            Variant("watch, call sites off", watch(*step_on, "--no-call-sites") + train,
                    ok=watch_ok),
            Variant("watch, call sites on", watch(*step_on) + train, ok=watch_ok),
            Variant("watch, call sites on, --keep-pymalloc",
                    watch(*step_on, "--keep-pymalloc") + train, ok=watch_ok),
            # The leakbound module's collections and its gc.freeze() of what the first one
            # leaves (docs/watch.md, "Python and the collector") spare the program the automatic
            # full collections over torch's objects that bare pays: the default rows carry that
            # saving. Without them the program's collector runs as bare: the hooks' own cost.
            Variant("watch, call sites on, LEAKBOUND_CENSUS_GC=0 (the collector as bare)",
                    watch(*step_on) + train, env={"LEAKBOUND_CENSUS_GC": "0"}, ok=watch_ok)]
        if heaptrack:
            variants.append(Variant("heaptrack", heaptrack_cmd() + train))
        if args.memray_python:
            variants.append(Variant("memray run", [args.memray_python, "-m", "memray", "run", "-f",
                                                   "-o", os.path.join(scratch, "m.bin")]
                                    + train[1:]))
        programs.append(("torch", "PyTorch CPU MLP training, %d steps (interpreter start and import torch "
                         "included)" % args.torch_steps, variants))
    if "lines" in only:
        leak = [args.python, mlp, "sum_loss", "step_on", str(args.torch_steps)]
        variants = [Variant("bare", leak),
                    Variant("watch, Python lines off (LEAKBOUND_PYTHON_LINES=0)",
                            watch(*step_on) + leak, env={"LEAKBOUND_PYTHON_LINES": "0"},
                            ok=(1,)),
                    Variant("watch, Python lines on (the default)", watch(*step_on) + leak,
                            ok=(1,))]
        programs.append(("lines", "The same, leaking (running = running + loss): Python lines switched on "
                         "for the growing sites", variants))
    if "loader" in only:
        tree = [args.python, os.path.join(args.programs, "torch_tree.py"), "loader-clean"]
        env = {"TREE_STEPS": str(args.loader_steps)}
        variants = [Variant("bare", tree, env=env),
                    Variant("watch, call sites off", watch(*step_on, "--no-call-sites") + tree,
                            env=env, ok=watch_ok),
                    Variant("watch, call sites on", watch(*step_on) + tree, env=env, ok=watch_ok)]
        programs.append(("loader", "PyTorch training fed by a DataLoader with 2 persistent workers, %d steps"
                         % args.loader_steps, variants))

    counted = None
    if "malloc" in only and not args.no_instructions:
        if shutil.which("valgrind"):
            counted = [v for v in programs[0][2] if v.label != "heaptrack"]
        else:
            notes.append("instructions a pair: skipped (valgrind not installed; apt-get install "
                         "valgrind)")
    measured = {}
    try:
        for key, title, variants in programs:
            log("%s (%d rounds)" % (title, args.rounds))
            measure(title, variants, args.rounds, log, scratch)
            lines += table(title, variants)
            measured[key] = variants
        if counted:
            log("malloc/free loop under callgrind, %d pairs" % INSTRUCTION_PAIRS)
            lines += loop_instructions(counted, scratch, log)
    except KeyboardInterrupt:
        log("interrupted: the tables of the programs measured so far follow")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines += goals_table(measured)
    header = ["Paired, alternating runs: %d rounds; one round runs every variant once." % args.rounds]
    text = "\n".join(header + ["- " + n for n in notes] + lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text)
        os.replace(args.out + ".tmp", args.out)
    status = 0
    for _, title, variants in programs:
        for v in variants:
            if v.failure:
                log("FAILED: %s, %s: %s" % (title, v.label, v.failure))
                status = 1
        worst = worst_watch_ratio(variants)
        if args.fail_above is not None and worst and worst[0] > args.fail_above:
            log("FAILED: %s, %s: %.2fx bare, above --fail-above %.2fx" % (
                title, worst[1], worst[0], args.fail_above))
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
