"""PyTorch's own DistributedDataParallel (Gloo, 2 processes) on the shards export-cli train
uses: the reference of tests/cli/test_distributed.py's digits CNN check.

    python ddp_reference.py INIT.pt DATA.pt BATCH STEPS LR MOMENTUM SEED OUT.pt

INIT.pt: the model's state_dict (examples/digits/model.py DigitsCNN); DATA.pt: (inputs,
targets). Each rank takes the shard of torch.randperm(n, generator seeded with SEED) that
DistributedSampler(shuffle, drop_last=False) gives it, trains STEPS SGD steps of BATCH with
cross_entropy through DDP (broadcast_buffers=True), and rank 0 writes its state_dict to OUT.pt.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "digits"))
from model import DigitsCNN  # noqa: E402

WORLD = 2


def shard(n: int, seed: int, rank: int) -> torch.Tensor:
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    total = -(-n // WORLD) * WORLD
    padded = torch.cat([perm, perm[:total - n]])
    return padded[rank:total:WORLD]


def worker(rank, store, init, data, batch, steps, lr, momentum, seed, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    model = DigitsCNN()
    model.load_state_dict(torch.load(init))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum)
    x, y = torch.load(data)
    idx = shard(x.shape[0], seed, rank)
    ddp.train()
    for s in range(steps):
        b = idx[s * batch:(s + 1) * batch]
        loss = torch.nn.functional.cross_entropy(ddp(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save(model.state_dict(), out)
    dist.destroy_process_group()


def main() -> None:
    init, data, batch, steps, lr, momentum, seed, out = sys.argv[1:9]
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, nprocs=WORLD,
                 args=(os.path.join(tmp, "store"), init, data, int(batch), int(steps),
                       float(lr), float(momentum), int(seed), out))


if __name__ == "__main__":
    main()
