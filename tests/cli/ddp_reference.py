"""PyTorch's own DistributedDataParallel (Gloo, 2 processes) on the shards pt2rt's
data-parallel training uses: the reference of tests/cli/test_distributed.py's digits CNN checks
(export-cli train --nproc-per-node 2 and examples/digits/finetune_ddp.cpp).

    python ddp_reference.py INIT.pt DATA.pt OUT.pt --batch B --epochs E --lr LR
                            [--optimizer sgd|adam] [--momentum M] [--seed S]

INIT.pt: the model's state_dict (examples/digits/model.py DigitsCNN); DATA.pt: (inputs,
targets). One generator seeded once with SEED gives every epoch's torch.randperm(n); each rank
takes the share DistributedSampler(shuffle, drop_last=False) gives it (padded by wrapping
around to ceil(n / 2)), trains batches of B of it (the last one partial) with cross_entropy
through DDP (broadcast_buffers=True), one optimizer step each, and rank 0 writes its
state_dict to OUT.pt.
"""
import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "digits"))
from model import DigitsCNN  # noqa: E402

WORLD = 2


def shard(perm: torch.Tensor, rank: int) -> torch.Tensor:
    """`rank`'s share of an epoch's permutation, split by PyTorch's own DistributedSampler
    (drop_last=False; shuffle=False: the permutation is the shuffle)."""
    sampler = DistributedSampler(range(perm.shape[0]), num_replicas=WORLD, rank=rank,
                                 shuffle=False, drop_last=False)
    return perm[list(sampler)]


def worker(rank, store, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    model = DigitsCNN()
    model.load_state_dict(torch.load(args.init))
    ddp = DistributedDataParallel(model)
    if args.optimizer == "adam":
        opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    x, y = torch.load(args.data)
    gen = torch.Generator().manual_seed(args.seed)
    ddp.train()
    for _ in range(args.epochs):
        idx = shard(torch.randperm(x.shape[0], generator=gen), rank)
        for i in range(0, len(idx), args.batch):
            b = idx[i:i + args.batch]
            loss = torch.nn.functional.cross_entropy(ddp(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    if rank == 0:
        torch.save(model.state_dict(), args.out)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("init")
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, nprocs=WORLD, args=(os.path.join(tmp, "store"), args))


if __name__ == "__main__":
    main()
