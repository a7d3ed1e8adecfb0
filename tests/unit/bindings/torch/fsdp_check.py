"""FSDP2 (torch.distributed.fsdp.fully_shard) training of a small model,
unchanged, on backend "loom" and on "gloo" (same seed, same data, same
process): the parameters must agree after every step.

FSDP2 shards each parameter across the ranks, all-gathers it
(all_gather_into_tensor) for forward and backward, and reduce-scatters the
gradients (reduce_scatter_tensor), so this exercises the collectives of
sharded training rather than DDP's all-reduce.

Tolerance: with 2 ranks each element of a reduce-scatter is the sum of two
numbers, the same in any order, so loom and gloo must agree bit for bit;
with more ranks the summation order may differ, and 20 steps of Adam allow
a float32 difference of at most 1e-5 (absolute, on parameters of magnitude ~0.3).

Run: loomrun -n N python fsdp_check.py   or   torchrun --nproc_per_node N fsdp_check.py
"""
import copy

import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

from harness import check, finish, init, log

STEPS, BATCH, FEATURES, CLASSES = 20, 8, 24, 5

rank, world, gloo = init()
TOLERANCE = 0.0 if world == 2 else 1e-5

torch.manual_seed(0)
template = nn.Sequential(nn.Linear(FEATURES, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, CLASSES))


def sharded(group):
    model = copy.deepcopy(template)
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


import torch.distributed as dist  # noqa: E402

runs = {"loom": sharded(dist.group.WORLD), "gloo": sharded(gloo)}
opts = {name: torch.optim.Adam(m.parameters(), lr=1e-2) for name, m in runs.items()}
loss_fn = nn.CrossEntropyLoss()
TEACHER = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))


def full_params(m):
    """Every parameter, gathered from its shards (DTensor.full_tensor)."""
    return torch.cat([p.full_tensor().detach().reshape(-1) for p in m.parameters()])


worst = 0.0
for step in range(STEPS):
    x = torch.randn(BATCH, FEATURES, generator=torch.Generator().manual_seed(1000 * step + rank))
    y = (x @ TEACHER).argmax(1)
    for name, m in runs.items():
        opts[name].zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opts[name].step()
        if step == 0 and name == "loom":
            first_loss = loss.item()
    d = (full_params(runs["loom"]) - full_params(runs["gloo"])).abs().max().item()
    worst = max(worst, d)
    check(d <= TOLERANCE, f"rank {rank} step {step}: loom and gloo FSDP2 parameters differ by {d}")
log(rank, f"FSDP2 with {world} processes: loss {first_loss:.4f} -> {loss.item():.4f}, "
          f"max |loom - gloo| over {STEPS} steps {worst:.2e} (allowed {TOLERANCE:.0e})")
check(loss.item() < first_loss, "training did not reduce the loss")
check((full_params(runs["loom"]) - torch.cat([p.reshape(-1) for p in template.parameters()])).abs().max() > 1e-2,
      "parameters did not move")
finish(rank, f"fsdp2 ({world} processes)")
