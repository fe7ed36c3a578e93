"""The `leakbound` module's census collection, checked from inside a watched program
(watch/tests/watch_test.sh, cases py_census_gc_*): `py_census_gc.py EXPECT`.

EXPECT: frozen (the default: cyclic garbage collected before the census, then the live world
frozen) | not_frozen (LEAKBOUND_CENSUS_GC=nofreeze) | off (LEAKBOUND_CENSUS_GC=0: nothing
collected) | own (the program froze objects itself: the module adds no freeze of its own).
The collector's automatic runs are off, so only the module's collections free cycles. Exits 1
with the reason when the module did something else.
"""
import gc
import sys
import weakref

import leakbound

EXPECT = sys.argv[1]
gc.disable()
if EXPECT == "own":
    keep = [[] for _ in range(100)]
    gc.freeze()
own_frozen = gc.get_freeze_count()


class Cycle:
    def __init__(self):
        self.me = self


def garbage_cycle():
    return weakref.ref(Cycle())  # unreachable at once, freed only by a collection


if not leakbound.watching():
    sys.exit("py_census_gc.py: run it under leakbound watch")
dead = garbage_cycle()
leakbound.step()  # the first marker is a census point (the census unit is 1 for 16 samples)
collected = dead() is None
frozen = gc.get_freeze_count() - own_frozen
for _ in range(40):
    leakbound.step()

problems = []
if EXPECT == "off":
    if collected:
        problems.append("a cycle was collected with LEAKBOUND_CENSUS_GC=0")
elif not collected:
    problems.append("the cycle made before the first census point is still live")
if EXPECT == "frozen" and frozen == 0:
    problems.append("nothing was frozen after the first census collection")
if EXPECT in ("not_frozen", "off", "own") and frozen != 0:
    problems.append("%d objects were frozen, want none" % frozen)
if problems:
    sys.exit("py_census_gc.py %s: %s" % (EXPECT, "; ".join(problems)))
print("py_census_gc.py %s: as expected (collected %s, frozen %d)" % (EXPECT, collected, frozen))
