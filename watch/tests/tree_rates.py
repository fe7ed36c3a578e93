#!/usr/bin/env python3
"""Rates of the DataLoader process-tree twins under `leakbound watch` (docs/watch.md, "Process
trees"), on Debian's python3-torch: RUNS runs each of torch_tree.py's loader-clean twin and its
loader-leak twin (DataLoader worker 1 keeps 4 KiB a sample) at each trainer step count, under
`--step-on torch.optim.SGD.step` (`--modes` adds the copy-on-read twin, `cow`, clean too; `--jobs 2`
runs two at once, the load of `ctest -j2`). Counts the clean runs in which any process was judged anything
but PASS (and which process, at what rate), and the leaking runs in which the job's verdict is
unbounded-growth in DataLoader worker 1 with its first row at the leaking line.

Writes OUT/tree_rates.md and OUT/tree_rates.json; progress on stderr."""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

LEAK_LINE = "self.kept.append(bytearray(4096))"


def run_once(args, mode, steps, scratch, index):
    out = tempfile.mkdtemp(dir=scratch)  # one per run: --jobs runs several at once
    env = dict(os.environ, TREE_STEPS=str(steps))
    proc = subprocess.run([args.leakbound, "watch", "--out", out, "--step-on",
                           "torch.optim.SGD.step"] + args.watch_arg +
                          ["--", args.python, args.program, mode],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        report = json.load(open(os.path.join(out, "report.json")))
    except (OSError, ValueError) as error:
        return {"rc": proc.returncode, "error": "no report (%s): %s" % (error, proc.stderr[-300:])}
    flagged = []
    for w in report["workloads"]:
        if w["verdict"] != "PASS":
            rate = re.search(r"grew ([0-9.,]+ (?:B|KiB|MiB)/step)", w.get("evidence", ""))
            flagged.append("%s: %s%s" % (w["name"], w["verdict"],
                                         " " + rate.group(1) if rate else ""))
    if flagged and mode != "loader-leak" and args.keep_flagged:
        # Named as the run is in tree_rates.md ("run N"), with the options watch was given.
        shutil.copytree(out, os.path.join(args.out, "flagged", "%s-%d-run%d%s" % (
            mode, steps, index + 1, "".join(a.replace("-", "_") for a in args.watch_arg))))
    shutil.rmtree(out, ignore_errors=True)
    worker1 = [w for w in report["workloads"] if w["name"].endswith("DataLoader worker 1")]
    top = worker1[0]["attribution"][0]["op"] if worker1 and worker1[0]["attribution"] else ""
    named = bool(worker1) and worker1[0]["verdict"] == "unbounded-growth" and any(
        re.search(r"%s:%d\b" % (re.escape(os.path.basename(args.program)), n), top)
        for n in args.leak_lines)
    return {"rc": proc.returncode, "processes": len(report["workloads"]), "flagged": flagged,
            "worker1_named": named, "worker1_top": top}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leakbound", required=True)
    parser.add_argument("--program", required=True, help="watch/tests/programs/torch_tree.py")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--steps", type=int, nargs="+", default=[480, 1500])
    parser.add_argument("--modes", nargs="+", default=["loader-clean", "loader-leak"],
                        choices=["loader-clean", "loader-leak", "cow"])
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--watch-arg", action="append", default=[],
                        help="one more option for `leakbound watch` (repeat: --watch-arg=--keep-pymalloc)")
    parser.add_argument("--keep-flagged", action="store_true",
                        help="keep the report folder of each clean twin's run that was flagged, "
                             "under OUT/flagged/")
    args = parser.parse_args()
    if args.runs < 1 or any(s < 100 for s in args.steps) or args.jobs < 1:
        parser.error("--runs and --jobs must be at least 1 and every --steps at least 100")
    os.makedirs(args.out, exist_ok=True)
    args.leak_lines = [n for n, text in enumerate(open(args.program), 1) if LEAK_LINE in text]
    if not args.leak_lines:
        parser.error("%s has no line %r" % (args.program, LEAK_LINE))
    results = []
    started = time.time()
    with tempfile.TemporaryDirectory() as scratch:
        for steps in args.steps:
            for mode in args.modes:
                pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
                try:
                    futures = [pool.submit(run_once, args, mode, steps, scratch, i)
                               for i in range(args.runs)]
                    for i, _ in enumerate(concurrent.futures.as_completed(futures)):
                        print("tree_rates: %s at %d steps, %d of %d (%.0f s)"
                              % (mode, steps, i + 1, args.runs, time.time() - started),
                              file=sys.stderr)
                    runs = [f.result() for f in futures]
                except KeyboardInterrupt:  # the runs not started yet never start
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
                pool.shutdown()
                results.append({"mode": mode, "steps": steps, "runs": runs, "jobs": args.jobs,
                                "watch_args": args.watch_arg})
    lines = (["`leakbound watch` options added to each run: %s" % " ".join(args.watch_arg), ""]
             if args.watch_arg else []) + ["| twin | trainer steps | runs (at once) | a process not PASS | job caught in worker 1, "
             "first row at the leaking line | no report |", "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        runs = r["runs"]
        broken = sum(1 for x in runs if "error" in x)
        ok = [x for x in runs if "error" not in x]
        not_pass = sum(1 for x in ok if x["flagged"])
        named = sum(1 for x in ok if x["worker1_named"])
        lines.append("| %s | %d | %d (%d) | %d | %s | %d |" % (
            r["mode"], r["steps"], len(runs), r["jobs"], not_pass,
            named if r["mode"] == "loader-leak" else "-", broken))
    details = ["", "Clean runs not PASS:"]
    for r in results:
        if r["mode"] == "loader-leak":
            continue
        for i, x in enumerate(r["runs"]):
            if x.get("flagged") or "error" in x:
                details.append("- %s, %d steps, run %d: %s" % (
                    r["mode"], r["steps"], i + 1, x.get("error") or "; ".join(x["flagged"])))
    text = "\n".join(lines + details) + "\n"
    with open(os.path.join(args.out, "tree_rates.md.tmp"), "w") as f:
        f.write(text)
    os.replace(os.path.join(args.out, "tree_rates.md.tmp"), os.path.join(args.out, "tree_rates.md"))
    with open(os.path.join(args.out, "tree_rates.json.tmp"), "w") as f:
        json.dump(results, f, indent=1)
    os.replace(os.path.join(args.out, "tree_rates.json.tmp"),
               os.path.join(args.out, "tree_rates.json"))
    print(text, end="")


if __name__ == "__main__":
    main()
