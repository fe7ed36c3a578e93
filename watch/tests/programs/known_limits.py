"""Python programs the census judge is known to get wrong (docs/verdicts.md, "Failure modes,
stated"), measured by ci/known-limits.sh under `leakbound watch` (steps marked with
leakbound.step(), which watch puts on the path):

  str-growth    a string grown by += 64 characters a step (CPython resizes it in place: every
                byte lives in the newest block) - a leak
  list-growth   a list that gets None appended each step (no new object; the list's array is
                realloc'd as it grows) - a leak, ~8 bytes a step
  lru-pareto    an OrderedDict LRU cache of CAPACITY entries, full and steady, read with a
                Pareto-skewed key stream: popular entries live for many blocks - bounded

Usage: python3 known_limits.py MODE STEPS [SEED] [CAPACITY]
"""
import collections
import random
import sys

try:  # under `leakbound watch`; bare, the steps mark nothing
    from leakbound import step
except ImportError:
    def step():
        pass


def main():
    if len(sys.argv) < 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    mode, steps = sys.argv[1], int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    capacity = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    text, items, cache = "", [], collections.OrderedDict()
    for _ in range(steps):
        if mode == "str-growth":
            text += "x" * 64
        elif mode == "list-growth":
            items.append(None)
        elif mode == "lru-pareto":
            key = int(rng.paretovariate(1.2)) % 5000
            if key in cache:
                cache.move_to_end(key)
            else:
                cache[key] = [key] * 8
                if len(cache) > capacity:
                    cache.popitem(last=False)
        else:
            sys.exit("known_limits.py: unknown mode %r" % mode)
        step()
    print("known_limits.py %s: %d steps, text %d, items %d, cache %d"
          % (mode, steps, len(text), len(items), len(cache)))


if __name__ == "__main__":
    main()
