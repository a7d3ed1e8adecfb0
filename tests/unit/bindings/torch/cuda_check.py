"""CUDA tensors on backend "loom": collectives through Loom's device engine,
ordered against the caller's current CUDA stream, and DDP / FSDP2 training
on GPUs. Every rank uses GPU (local rank mod GPU count): ranks may share one.

Skips (exit 77, reason on stdout) where torch sees no GPU, where loom_torch
was built without CUDA, or where Loom has no usable CUDA device.

Run: python run_torchrun.py --probe 2 cuda_check.py
"""
import copy
import os
import sys

import torch


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


if not torch.cuda.is_available():
    skip(f"torch {torch.__version__} sees no CUDA device here")
import loom_torch  # noqa: E402

if not loom_torch.cuda_built():
    skip("loom_torch was built without CUDA (torch without CUDA, or no cuda_runtime_api.h at build time)")
if not loom_torch._C.loom_cuda_usable():
    skip("Loom has no usable CUDA device (libloom built without CUDA, or no driver)")
if "--probe" in sys.argv:
    sys.exit(0)

import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from harness import check, check_close, check_equal, log  # noqa: E402

local = int(os.environ.get("LOCAL_RANK", "0"))
device = torch.device("cuda", local % torch.cuda.device_count())
torch.cuda.set_device(device)
dist.init_process_group("loom", device_id=device)
rank, world = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")


def data(r, n, dtype, seed):
    g = torch.Generator().manual_seed(seed * 1009 + r)
    return torch.randint(-2, 3, (n,), generator=g).to(dtype)


# ---- collectives on device memory vs references computed on the host --------------
seed = 0
for dtype in (torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
    for name, op in (("SUM", dist.ReduceOp.SUM), ("MAX", dist.ReduceOp.MAX), ("AVG", dist.ReduceOp.AVG)):
        seed += 1
        ins = [data(r, 1000 + seed, dtype, seed) for r in range(world)]
        t = ins[rank].to(device)
        dist.all_reduce(t, op=op)
        s = torch.stack([x.double() for x in ins])
        want = {"SUM": s.sum(0), "MAX": s.max(0).values, "AVG": s.sum(0) / world}[name]
        if name == "AVG" and not dtype.is_floating_point:
            want = torch.trunc(want)
        check_equal(t.cpu(), want.to(dtype), "cuda all_reduce", dtype, name)
for name, op, fn in (("BAND", dist.ReduceOp.BAND, torch.bitwise_and), ("BOR", dist.ReduceOp.BOR, torch.bitwise_or),
                     ("BXOR", dist.ReduceOp.BXOR, torch.bitwise_xor)):
    ins = [data(r, 777, torch.int32, 50) for r in range(world)]
    t = ins[rank].to(device)
    dist.all_reduce(t, op=op)
    want = ins[0]
    for x in ins[1:]:
        want = fn(want, x)
    check_equal(t.cpu(), want, "cuda all_reduce", name)
log(rank, "cuda all_reduce: ok")

x = data(rank, 4096, torch.float32, 60).to(device)
out = torch.empty(world * 4096, device=device)
dist.all_gather_into_tensor(out, x)
check_equal(out.cpu(), torch.cat([data(r, 4096, torch.float32, 60) for r in range(world)]), "cuda all_gather_into_tensor")
big = torch.cat([data(rank, 512, torch.float32, 70 + j) for j in range(world)]).to(device)
rs = torch.empty(512, device=device)
dist.reduce_scatter_tensor(rs, big)
check_equal(rs.cpu(), sum(data(r, 512, torch.float32, 70 + rank) for r in range(world)), "cuda reduce_scatter_tensor")
b = data(rank, 300, torch.bfloat16, 80).to(device)
dist.broadcast(b, src=world - 1)
check_equal(b.cpu(), data(world - 1, 300, torch.bfloat16, 80), "cuda broadcast")
sends = [rank + j + 1 for j in range(world)]
a2a_in = data(rank, sum(sends), torch.float32, 90).to(device)
recv_rows = [r + rank + 1 for r in range(world)]
a2a_out = torch.empty(sum(recv_rows), device=device)
dist.all_to_all_single(a2a_out, a2a_in, recv_rows, sends)
want = torch.cat([data(r, sum(r + j + 1 for j in range(world)), torch.float32, 90)[
    sum(r + j + 1 for j in range(rank)):sum(r + j + 1 for j in range(rank + 1))] for r in range(world)])
check_equal(a2a_out.cpu(), want, "cuda all_to_all_single uneven")
nxt, prv = (rank + 1) % world, (rank - 1) % world
got = torch.empty(1 << 18, device=device)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, data(rank, 1 << 18, torch.float32, 95).to(device), nxt),
                               dist.P2POp(dist.irecv, got, prv)])
for req in reqs:
    req.wait()
check_equal(got.cpu(), data(prv, 1 << 18, torch.float32, 95), "cuda batch_isend_irecv ring")
log(rank, "cuda all_gather_into_tensor, reduce_scatter_tensor, broadcast, all_to_all_single, send/recv: ok")

# ---- stream order: produced on a side stream, reduced, consumed, no host sync ------
side = torch.cuda.Stream(device)
with torch.cuda.stream(side):
    m = torch.full((2048, 2048), 1.0 / 2048, device=device)
    y = (m @ m) @ torch.full((2048,), float(rank + 1), device=device)  # slow enough to still run at enqueue
    work = dist.all_reduce(y, async_op=True)
    work.wait()  # the side stream waits for Loom; the host does not
    z = y * 2
torch.cuda.synchronize(device)
check_close(z.cpu(), torch.full((2048,), 2.0 * world * (world + 1) / 2), 1e-5, 1e-5, "cuda stream order")
fut = dist.all_reduce(torch.ones(10, device=device), async_op=True).get_future()
check_equal(fut.wait()[0].cpu(), torch.full((10,), float(world)), "cuda future")
log(rank, "cuda stream ordering and futures: ok")

# ---- DDP on GPUs: loom vs gloo (CUDA tensors), same data -------------------------------
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 4)).to(device)
runs = {"loom": DDP(copy.deepcopy(model), device_ids=[device], bucket_cap_mb=0.01),
        "gloo": DDP(copy.deepcopy(model), device_ids=[device], process_group=gloo, bucket_cap_mb=0.01)}
opts = {k: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for k, m in runs.items()}
for step in range(20):
    xb = torch.randn(16, 32, generator=torch.Generator().manual_seed(step * 100 + rank)).to(device)
    yb = xb[:, :4].argmax(1)
    for k, m in runs.items():
        opts[k].zero_grad()
        nn.functional.cross_entropy(m(xb), yb).backward()
        opts[k].step()
diff = max((p.detach() - q.detach()).abs().max().item()
           for p, q in zip(runs["loom"].parameters(), runs["gloo"].parameters()))
log(rank, f"cuda DDP: max |loom - gloo| {diff:.2e}")
check(diff <= 1e-5, f"rank {rank}: loom and gloo DDP on GPU differ by {diff}")

# ---- FSDP2 on GPUs: loom (CUDA) vs gloo (CPU), same data -------------------------------
from torch.distributed.device_mesh import DeviceMesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

torch.manual_seed(1)
template = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 5))
gpu = copy.deepcopy(template).to(device)
cpu = copy.deepcopy(template)
for mod, mesh in ((gpu, DeviceMesh.from_group(dist.group.WORLD, "cuda")), (cpu, DeviceMesh.from_group(gloo, "cpu"))):
    for layer in mod:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(mod, mesh=mesh)
opt_gpu, opt_cpu = torch.optim.Adam(gpu.parameters(), lr=1e-2), torch.optim.Adam(cpu.parameters(), lr=1e-2)
for step in range(10):
    xb = torch.randn(8, 24, generator=torch.Generator().manual_seed(step * 10 + rank))
    yb = xb[:, :5].argmax(1)
    for mod, opt, dev in ((gpu, opt_gpu, device), (cpu, opt_cpu, torch.device("cpu"))):
        opt.zero_grad()
        nn.functional.cross_entropy(mod(xb.to(dev)), yb.to(dev)).backward()
        opt.step()
diff = max((p.full_tensor().cpu() - q.full_tensor()).abs().max().item()
           for p, q in zip(gpu.parameters(), cpu.parameters()))
log(rank, f"cuda FSDP2: max |loom on GPU - gloo on CPU| {diff:.2e}")
check(diff <= 1e-4, f"rank {rank}: FSDP2 on GPU (loom) and CPU (gloo) differ by {diff}")

dist.barrier()
dist.destroy_process_group()
log(rank, "cuda: all checks passed")
