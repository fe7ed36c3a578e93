#!/usr/bin/env python3
"""Attribution measured over a seeded family (docs/watch.md, "Where: measured").

Runs programs/where_family.c under `leakbound watch` for SEEDS seeds, leaking and clean: one
library call site (strdup's malloc) reached from 2-6 lines, one of which keeps its copies, the
others freeing theirs at once or up to 8 steps later. Tallies, per mode:
  leak:  caught (unbounded-growth), and whether the first growing row names the leaking line;
  clean: PASS, and no growing row.
Writes where_property.md and .json to --out. Exit 0 when the leaking line is named on at least
--min-named of the seeds (default 0.95), every leak is caught and no clean run grows; 1
otherwise; 2 on bad arguments.

    where_property.py --leakbound B --family F --seeds 200 --out DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def run_one(args, mode, seed):
    with tempfile.TemporaryDirectory(prefix="lb-where-") as out:
        command = [args.leakbound, "watch", "--out", out, "--", args.family, mode, str(seed),
                   str(args.steps)]
        try:
            proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return {"seed": seed, "mode": mode, "error": "timed out"}
        expect = re.search(r"^expect (\d+)$", proc.stdout, re.M)
        drawn = re.search(r"^callers .*$", proc.stdout, re.M)
        path = os.path.join(out, "report.json")
        if not os.path.exists(path) or not expect:
            return {"seed": seed, "mode": mode,
                    "error": "exit %d, no report: %s" % (proc.returncode, proc.stderr[-300:])}
        w = json.load(open(path))["workloads"][0]
        growing = [a for a in w["attribution"] if a.get("census") in ("growth", "recurring")]
        top = growing[0]["op"] if growing else ""
        line = "where_family.c:%s" % expect.group(1)
        return {"seed": seed, "mode": mode, "verdict": w["verdict"], "top": top,
                "named": bool(re.search(re.escape(line) + r"[ )]", top + " ")),
                "growing_rows": len(growing), "drawn": drawn.group(0) if drawn else ""}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--leakbound", required=True)
    p.add_argument("--family", required=True, help="the watch_where_family program")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--min-named", type=float, default=0.95)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if args.seeds < 1 or args.steps < 30 or args.jobs < 1 or not 0 <= args.min_named <= 1:
        p.error("--seeds >= 1, --steps >= 30, --jobs >= 1, 0 <= --min-named <= 1")
    for path in (args.leakbound, args.family):
        if not os.access(path, os.X_OK):
            p.error("not an executable: %s" % path)
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    work = [(mode, seed) for seed in range(1, args.seeds + 1) for mode in ("leak", "clean")]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(lambda w: run_one(args, *w), work))
    errors = [r for r in runs if "error" in r]
    leaks = [r for r in runs if r["mode"] == "leak" and "error" not in r]
    cleans = [r for r in runs if r["mode"] == "clean" and "error" not in r]
    caught = sum(r["verdict"] == "unbounded-growth" for r in leaks)
    named = sum(r["named"] for r in leaks)
    false_pos = sum(r["verdict"] != "PASS" for r in cleans)
    grew = sum(r["growing_rows"] > 0 for r in cleans)
    seconds = time.time() - started
    lines = [
        "# Attribution over a seeded family: the leaking line of a shared library site",
        "",
        "%d seeds, %d steps each (`where_property.py --seeds %d`), %.0f s." % (
            args.seeds, args.steps, args.seeds, seconds),
        "",
        "| mode | runs | caught / flagged | first growing row names the leaking line | a growing row |",
        "|---|---:|---:|---:|---:|",
        "| leak | %d | %d | %d (%.1f%%) | %d |" % (
            len(leaks), caught, named, 100.0 * named / max(1, len(leaks)),
            sum(r["growing_rows"] > 0 for r in leaks)),
        "| clean | %d | %d | - | %d |" % (len(cleans), false_pos, grew),
        "",
    ]
    missed = [r for r in leaks if not r["named"]]
    if missed:
        lines.append("Leaks not named by their line:")
        lines += ["- seed %d: %s; first growing row: %s" % (r["seed"], r["drawn"], r["top"] or "none")
                  for r in missed]
    flagged = [r for r in cleans if r["verdict"] != "PASS" or r["growing_rows"] > 0]
    if flagged:
        lines.append("Clean runs flagged:")
        lines += ["- seed %d: %s, %s" % (r["seed"], r["verdict"], r["top"]) for r in flagged]
    if errors:
        lines.append("Errors:")
        lines += ["- seed %d %s: %s" % (r["seed"], r["mode"], r["error"]) for r in errors]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "where_property.md.tmp"), "w") as f:
        f.write(text)
    os.replace(os.path.join(args.out, "where_property.md.tmp"),
               os.path.join(args.out, "where_property.md"))
    with open(os.path.join(args.out, "where_property.json.tmp"), "w") as f:
        json.dump({"seeds": args.seeds, "steps": args.steps, "runs": runs}, f, indent=1)
    os.replace(os.path.join(args.out, "where_property.json.tmp"),
               os.path.join(args.out, "where_property.json"))
    sys.stdout.write(text)
    ok = (not errors and caught == len(leaks) and false_pos == 0 and grew == 0 and
          named >= args.min_named * len(leaks))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
