#!/usr/bin/env python3
"""Draws the census power curve (docs/verdicts.md, "Power") as a self-contained SVG.

    census_power_svg.py power.csv out.svg

power.csv: rate_bytes_per_step,noise_kib,seeds,detected (CensusProperty.PowerCurve writes it).
One line per working-set noise amplitude: the fraction of seeds called unbounded-growth against
the leak rate (log scale). Exit 2 on a malformed CSV.
"""
import csv
import math
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: census_power_svg.py power.csv out.svg")
    rows = {}
    try:
        with open(sys.argv[1]) as f:
            for r in csv.DictReader(f):
                noise = int(r["noise_kib"])
                rows.setdefault(noise, []).append(
                    (float(r["rate_bytes_per_step"]), int(r["detected"]) / int(r["seeds"])))
    except (OSError, KeyError, ValueError, ZeroDivisionError) as e:
        print("census_power_svg.py: cannot read %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 2
    if not rows:
        print("census_power_svg.py: %s has no rows" % sys.argv[1], file=sys.stderr)
        return 2
    rates = sorted({rate for line in rows.values() for rate, _ in line})
    w, h, left, right, top, bottom = 640, 360, 60, 150, 40, 50
    lo, hi = math.log2(rates[0]), math.log2(rates[-1])
    x = lambda rate: left + (math.log2(rate) - lo) / max(hi - lo, 1e-9) * (w - left - right)
    y = lambda frac: top + (1 - frac) * (h - top - bottom)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12">' % (w, h, w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">Census rule: leaks detected vs leak rate '
           '(3 blocks of 32 steps, in-process)</text>' % left]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (
            left, w - right, y(frac), y(frac)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (left - 6, y(frac) + 4, frac * 100))
    for rate in rates:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (x(rate), h - bottom + 18, rate))
    out.append('<text x="%d" y="%d" text-anchor="middle">leak rate (bytes per step, log scale)</text>' % (
        (left + w - right) // 2, h - 10))
    for i, (noise, line) in enumerate(sorted(rows.items())):
        line.sort()
        colour = colours[i % len(colours)]
        points = " ".join("%.1f,%.1f" % (x(r), y(f)) for r, f in line)
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (colour, points))
        for r, f in line:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (x(r), y(f), colour))
        ly = top + 18 * i
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>' % (
            w - right + 10, w - right + 30, ly, ly, colour))
        out.append('<text x="%d" y="%d">working set %s</text>' % (
            w - right + 34, ly + 4, "none" if noise == 0 else "up to %d KiB" % noise))
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
