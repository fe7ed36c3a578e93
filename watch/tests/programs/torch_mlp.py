"""A PyTorch CPU training loop watched by the watch tests: `torch_mlp.py BUG MARKER STEPS`.

BUG: clean | sum_loss (running = running + loss keeps every step's graph) | keep_outputs (each
step's output appended to a list) | hook_per_step (a forward hook registered every step).
MARKER: step_on (no marker: run under --step-on torch.optim.Optimizer.step) | call
(leakbound.step()) | with (with leakbound.step():) | nvtx (an NVTX range "train_step", needs the
`nvtx` package; the test skips otherwise).
"""
import sys

import torch

BUG, MARKER, STEPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
if MARKER in ("call", "with"):
    import leakbound
if MARKER == "nvtx":
    import nvtx

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(16, 32)
target = torch.randn(16, 1)
running = 0.0
kept = []


def train_step():
    global running
    optimizer.zero_grad()
    output = model(data)
    # Not F.mse_loss: in torch 1.13 its broadcast_tensors call keeps a 59-byte object every ~12
    # steps (found by watch, confirmed with tracemalloc; docs/watch.md), which is not this
    # test's subject.
    loss = ((output - target) ** 2).mean()
    loss.backward()
    optimizer.step()
    if BUG == "sum_loss":
        running = running + loss
    else:
        running += loss.item()
    if BUG == "keep_outputs":
        kept.append(output)
    if BUG == "hook_per_step":
        model[0].register_forward_hook(lambda module, inputs, out: None)


for _ in range(STEPS):
    if MARKER == "with":
        with leakbound.step():
            train_step()
    elif MARKER == "nvtx":
        with nvtx.annotate("train_step"):
            train_step()
    else:
        train_step()
        if MARKER == "call":
            leakbound.step()
print("final running loss", float(running))
