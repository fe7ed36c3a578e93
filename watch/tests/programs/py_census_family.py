"""Python members of the census property suite (docs/verdicts.md, "Measured"):
`py_census_family.py CLASS SEED STEPS`, each step ended by leakbound.step().

gc     per-step garbage with reference cycles (left for CPython's cyclic collector) and a bounded
       16-entry cache: bounded
gc_leak  the same, plus one 96-character string kept per step: a leak
"""
import random
import sys

import leakbound

CLASS, SEED, STEPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if CLASS not in ("gc", "gc_leak"):
    sys.exit("py_census_family.py: CLASS must be gc or gc_leak, got %r" % CLASS)
rng = random.Random(SEED)


class Node:
    def __init__(self, payload):
        self.payload = payload
        self.peer = None


cache = {}
kept = []
for step in range(STEPS):
    # Garbage in cycles: unreachable at the end of the step, freed only by the collector.
    for _ in range(rng.randint(1, 8)):
        a, b = Node(bytearray(rng.randint(16, 512))), Node([step] * rng.randint(1, 32))
        a.peer, b.peer = b, a
    key = rng.randrange(64)
    cache[key] = [rng.random() for _ in range(rng.randint(1, 24))]
    while len(cache) > 16:
        cache.pop(next(iter(cache)))
    if CLASS == "gc_leak":
        kept.append("%096d" % step)
    leakbound.step()
