"""Steps of a Python program that has imported (a fake) torch: `fake_torch_steps.py STEPS`.
leakbound.step() at each step; the module sends torch.cuda's counters with every sample."""
import sys

import leakbound
import torch  # noqa: F401  (the fake one on PYTHONPATH)

for _ in range(int(sys.argv[1])):
    leakbound.step()
