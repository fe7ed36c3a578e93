"""A PyTorch CUDA training loop for the nightly GPU job (ci/nightly-gpu.sh), watched with
`leakbound watch --cuda --step-on torch.optim.SGD.step`: `torch_cuda_mlp.py BUG STEPS`.
BUG: clean | sum_loss (running = running + loss keeps every step's graph, on the device).
Exits 77 when CUDA is not available (the job records it as skipped)."""
import sys

import torch

BUG, STEPS = sys.argv[1], int(sys.argv[2])
if not torch.cuda.is_available():
    print("torch_cuda_mlp: CUDA is not available")
    sys.exit(77)
device = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(64, 256, device=device)
target = torch.randn(64, 1, device=device)
running = torch.zeros((), device=device)

for _ in range(STEPS):
    optimizer.zero_grad()
    loss = ((model(data) - target) ** 2).mean()
    loss.backward()
    optimizer.step()
    if BUG == "sum_loss":
        running = running + loss  # keeps each step's graph alive
    else:
        running += loss.detach()
print("final running loss", float(running))
