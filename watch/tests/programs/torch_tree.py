"""PyTorch jobs of several processes for `leakbound watch` (docs/watch.md, "Process trees"), run
with Debian's python3-torch on the CPU, each with a truth:

  loader-leak / loader-clean   a training loop fed by a DataLoader with 2 persistent workers;
                               in loader-leak, worker 1's __getitem__ keeps 4 KiB per sample
  cow                          the workers only read a list of 1,000,000 strings of the dataset,
                               40 more each sample (copy-on-read: their heap stays flat, their
                               private memory grows)
  spawn-leak / spawn-clean     torch.multiprocessing.spawn, 2 DDP ranks over gloo; in spawn-leak,
                               rank 1 keeps its losses (the summed-loss bug)
  launch-leak / launch-clean   a launcher that starts 2 ranks as processes with RANK /
                               WORLD_SIZE / MASTER_* set, the way torchrun does; rank 1 leaks in
                               launch-leak
Steps: run under `--step-on torch.optim.SGD.step`.
"""
import os
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.utils.data as data

STEPS = int(os.environ.get("TREE_STEPS", "240"))


class Samples(data.Dataset):
    def __init__(self, leak_in_worker, big_list):
        self.leak_in_worker = leak_in_worker
        self.kept = []
        self.table = [str(i) * 4 for i in range(1000000)] if big_list else None

    def __len__(self):
        return 1 << 30

    def __getitem__(self, index):
        info = data.get_worker_info()
        if self.leak_in_worker and info is not None and info.id == 1:
            self.kept.append(bytearray(4096))
        if self.table is not None:  # reading entries writes their refcounts: pages are copied
            at = (index * 40) % len(self.table)
            total = sum(len(s) for s in self.table[at:at + 40])
            index += total % 2
        return torch.full((16,), float(index % 7))


def train_loader(leak, big_list):
    # Tensor batches go through shared memory, and each worker's
    # torch.multiprocessing.reductions.shared_cache keeps up to 128 dead entries, replaced a few
    # at a time: survivors of every block stay for hundreds of batches, a bounded cache that a
    # short run reads as growth (docs/watch.md, "Process trees"). The cases run 3,000 steps.
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = data.DataLoader(Samples(leak, big_list), batch_size=8, num_workers=2,
                             persistent_workers=True)
    for step, batch in enumerate(loader):
        if step == STEPS:
            break
        opt.zero_grad()
        loss = model(batch).pow(2).mean()
        loss.backward()
        opt.step()


def train_rank(rank, world, leak):
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0
    for _ in range(STEPS):
        opt.zero_grad()
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        if leak and rank == 1:
            total = total + loss  # keeps every step's graph
    dist.destroy_process_group()


def spawned(rank, world, leak):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    train_rank(rank, world, leak)


def main():
    mode = sys.argv[1]
    if mode in ("loader-leak", "loader-clean", "cow"):
        train_loader(mode == "loader-leak", mode == "cow")
    elif mode in ("spawn-leak", "spawn-clean"):
        os.environ["MASTER_PORT"] = sys.argv[2]
        import torch.multiprocessing as mp
        mp.spawn(spawned, args=(2, mode == "spawn-leak"), nprocs=2)
    elif mode in ("launch-leak", "launch-clean"):
        ranks = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=sys.argv[2])
            ranks.append(subprocess.Popen([sys.executable, __file__, "rank", mode], env=env))
        sys.exit(max(p.wait() for p in ranks))
    elif mode == "rank":
        dist.init_process_group("gloo")
        train_rank(dist.get_rank(), dist.get_world_size(), sys.argv[2] == "launch-leak")
    else:
        sys.exit("usage: torch_tree.py loader-leak|loader-clean|cow|spawn-leak|spawn-clean|"
                 "launch-leak|launch-clean [PORT]")


if __name__ == "__main__":
    main()
