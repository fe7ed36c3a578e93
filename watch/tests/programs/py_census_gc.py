"""The `leakbound` module's collections, checked from inside a watched program
(watch/tests/watch_test.sh, cases py_census_gc_*): `py_census_gc.py EXPECT`.

EXPECT: frozen (the default: cyclic garbage collected before the first census point, every 16
steps and at census points, the live world frozen once) | not_frozen (LEAKBOUND_CENSUS_GC=
nofreeze) | off (LEAKBOUND_CENSUS_GC=0: nothing collected) | census_only
(LEAKBOUND_CENSUS_GC_EVERY=0: census points only) | own (the program froze objects before its
first step and unfreezes them after it: the module never freezes). CPython's automatic
collections are off, so only the module's collections free cycles. Exits 1 with the reasons
when the module did something else.
"""
import gc
import sys
import weakref

import leakbound

EXPECT = sys.argv[1]
STEPS = 300
# Census points after 256 samples: every 32nd (unit 32). Sample 272 is a multiple of 16 and
# not of 32: only the 16-step cadence collects there.
CADENCE_ONLY = 272
gc.disable()
if EXPECT == "own":
    keep = [[] for _ in range(100)]
    gc.freeze()


class Cycle:
    def __init__(self):
        self.me = self


def garbage_cycle():
    return weakref.ref(Cycle())  # unreachable at once, freed only by a collection


if not leakbound.watching():
    sys.exit("py_census_gc.py: run it under leakbound watch")
dead = garbage_cycle()
leakbound.step()  # the first marker is a census point (the census unit is 1 for 16 samples)
first_collected = dead() is None
if EXPECT == "own":
    gc.unfreeze()  # the program's own objects back: the module must not freeze the heap now
frozen_after_first = gc.get_freeze_count()
cadence_collected = None
made_later = None  # a list made after the first step and kept: a second freeze would take it
for step in range(2, STEPS + 1):
    if step == 2:
        made_later = [[] for _ in range(50)]
    if step == CADENCE_ONLY:
        dead = garbage_cycle()
    leakbound.step()
    if step == CADENCE_ONLY:
        cadence_collected = dead() is None
frozen_at_end = gc.get_freeze_count()
# gc.get_objects() lists generations 0-2, not the permanent one.
made_later_frozen = not any(o is made_later for o in gc.get_objects())

problems = []
want_collected = EXPECT != "off"
if first_collected != want_collected:
    problems.append("the cycle made before the first census point was %s" %
                    ("collected" if first_collected else "not collected"))
want_cadence = EXPECT in ("frozen", "not_frozen", "own")
if cadence_collected != want_cadence:
    problems.append("the cycle made before step %d (a cadence point, not a census point) was %s" %
                    (CADENCE_ONLY, "collected" if cadence_collected else "not collected"))
if EXPECT in ("frozen", "census_only"):
    if frozen_after_first == 0:
        problems.append("nothing was frozen after the first collection")
    elif made_later_frozen:
        problems.append("a list made after the first step was frozen: frozen again")
elif frozen_at_end != 0:
    problems.append("%d objects frozen at the end, want none" % frozen_at_end)
if problems:
    sys.exit("py_census_gc.py %s: %s" % (EXPECT, "; ".join(problems)))
print("py_census_gc.py %s: as expected (first %s, cadence %s, frozen %d)" %
      (EXPECT, first_collected, cadence_collected, frozen_at_end))
