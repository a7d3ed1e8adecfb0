"""Real DistributedDataParallel training of a small model: with backend
"loom" it must reach the parameters that the same run reaches with backend
"gloo" (same seed, same data, same process), and those of full-batch
training in one process (every rank's batch together, no communication),
which DDP's gradient averaging is equivalent to.

Tolerance: float32 all-reduces sum in another order than the full-batch
backward, and 30 steps of SGD with momentum amplify that; measured maximum
differences are ~1e-7 (loom vs gloo) and ~1e-6 (vs one process), the checks
allow 1e-5 and 1e-4 (absolute, on parameters of magnitude ~0.3).

Run: loomrun -n N python3 ddp_check.py   or   torchrun --nproc_per_node N ddp_check.py
"""
import copy
import os

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import check, finish, init, log

STEPS, BATCH, FEATURES, CLASSES = 30, 16, 20, 4
LOOM_VS_GLOO_TOL, VS_SINGLE_PROCESS_TOL = 1e-5, 1e-4

rank, world, gloo = init()
# loomrun alone hands out a job secret; torchrun's elastic agent sets GROUP_RANK too.
launcher = "loomrun" if "LOOM_JOB_SECRET" in os.environ else "torchrun"
log(rank, f"DDP with {world} processes launched by {launcher}")

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, CLASSES))
single = copy.deepcopy(model)
# Tiny buckets: several all-reduces per backward, launched while the
# gradients of earlier layers are still being computed.
runs = {
    "loom": DDP(copy.deepcopy(model), bucket_cap_mb=0.005),
    "gloo": DDP(copy.deepcopy(model), process_group=gloo, bucket_cap_mb=0.005),
    "single process": single,
}
opts = {name: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for name, m in runs.items()}
loss_fn = nn.CrossEntropyLoss()


# A learnable task: the class is the argmax of a fixed linear map of the input.
TEACHER = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))


def batch(step, r):
    x = torch.randn(BATCH, FEATURES, generator=torch.Generator().manual_seed(1000 * step + r))
    return x, (x @ TEACHER).argmax(1)


for step in range(STEPS):
    batches = [batch(step, r) for r in range(world)]
    for name, m in runs.items():
        if name == "single process":  # every rank's batch at once: the mean over all samples
            x = torch.cat([b[0] for b in batches])
            y = torch.cat([b[1] for b in batches])
        else:
            x, y = batches[rank]
        opts[name].zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opts[name].step()
    if step == 0:
        first_loss = loss.item()
log(rank, f"loss of the full batch: step 0 {first_loss:.4f}, step {STEPS - 1} {loss.item():.4f}")
check(loss.item() < first_loss, "training did not reduce the loss")


def params(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


loom_p, gloo_p, single_p = params(runs["loom"]), params(runs["gloo"]), params(single)
d_gloo = (loom_p - gloo_p).abs().max().item()
d_single = (loom_p - single_p).abs().max().item()
log(rank, f"max |param difference|: loom vs gloo {d_gloo:.2e}, loom vs one process {d_single:.2e}")
check(d_gloo <= LOOM_VS_GLOO_TOL, f"rank {rank}: loom and gloo DDP differ by {d_gloo}")
check(d_single <= VS_SINGLE_PROCESS_TOL, f"rank {rank}: loom DDP and full-batch training differ by {d_single}")
# Local training alone would end elsewhere: the check above needs the all-reduces.
check((params(model) - loom_p).abs().max().item() > 1e-2, "parameters did not move")
finish(rank, f"ddp ({world} processes, {launcher})")
