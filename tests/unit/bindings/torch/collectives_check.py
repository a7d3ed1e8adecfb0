"""Every c10d operation of backend "loom", checked against a reference
computed here from every rank's inputs (each rank generates all ranks' inputs
from seeds, no communication) and, where gloo supports the case, against
gloo's result for the same inputs in the same process.

Inputs are small integers (|x| <= 2), exact in every dtype and under every
reduction at these world sizes, so results must match bit for bit; one large
random float32 all-reduce is compared with a tolerance instead.

Run: loomrun -n N python3 collectives_check.py [--timeout-check]
"""
import datetime
import functools
import sys
import time

import torch
import torch.distributed as dist

from harness import check, check_close, check_equal, finish, init, log

REDUCE_DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int32, torch.int64, torch.uint32, torch.uint64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# Operations that only move data take every dtype (they travel as bytes).
MOVE_DTYPES = [d for d in REDUCE_DTYPES if d not in (torch.uint32, torch.uint64)] + [torch.int16, torch.complex64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG, "BAND": dist.ReduceOp.BAND,
       "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR, "PREMUL_SUM": None}
BITWISE = ("BAND", "BOR", "BXOR")
PREMUL_FACTOR = 0.5  # exact in every float dtype


def op_of(name):
    return dist._make_nccl_premul_sum(PREMUL_FACTOR) if name == "PREMUL_SUM" else OPS[name]


def defined(name, dtype):
    """Whether c10d defines reduction `name` on `dtype` (the backend rejects the rest)."""
    if name in BITWISE:
        return not dtype.is_floating_point
    if name == "PREMUL_SUM":
        return dtype.is_floating_point
    return not (name == "AVG" and dtype == torch.bool)


rank, world, gloo = init()
stats = {"vs_reference": 0, "vs_gloo": 0, "gloo_unsupported": set()}


UNSIGNED = (torch.bool, torch.uint8, torch.uint32, torch.uint64)


def data(r, shape, dtype, seed):
    """Rank r's input: integers in [-2, 2] ([0, 2] unsigned, {0, 1} bool)."""
    g = torch.Generator().manual_seed(seed * 1009 + r)
    lo, hi = (0, 2) if dtype == torch.bool else (0, 3) if dtype in UNSIGNED else (-2, 3)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def equal(got, want):
    # torch.equal lacks kernels for uint32/uint64: compare as int64 (exact).
    if got.dtype in (torch.uint32, torch.uint64):
        got, want = got.to(torch.int64), want.to(torch.int64)
    return torch.equal(got, want)


def reduced(name, tensors, dtype):
    """The reduction of `tensors`, computed here: bitwise ops on int64 (two's
    complement, so the low bits are the dtype's), the rest in float64 (exact
    for these inputs), cast back. bool reduces as 0/1: SUM is any, PRODUCT all."""
    if name in BITWISE:
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[name]
        return functools.reduce(fn, [t.to(torch.int64) for t in tensors]).to(dtype)
    s = torch.stack([t.to(torch.float64) for t in tensors])
    if name == "SUM":
        r = s.sum(0)
    elif name == "PREMUL_SUM":
        r = (s * PREMUL_FACTOR).sum(0)
    elif name == "PRODUCT":
        r = s.prod(0)
    elif name == "MIN":
        r = s.min(0).values
    elif name == "MAX":
        r = s.max(0).values
    else:  # AVG: floats divide; Loom's integer average truncates toward zero
        r = s.sum(0) / len(tensors)
        if not dtype.is_floating_point:
            r = torch.trunc(r)
    return r.to(dtype)


def strided(values, sentinel=7):
    """A non-contiguous view holding `values` (every other column of a wider
    tensor filled with `sentinel`, which must survive the operation)."""
    rows, cols = values.shape
    base = torch.full((rows, 2 * cols), sentinel).to(values.dtype)  # noqa: E501
    view = base[:, ::2]
    view.copy_(values)
    check(not view.is_contiguous(), "strided() made a contiguous view")
    return base, view


def check_gaps(base, sentinel, *what):
    check(equal(base[:, 1::2], torch.full((base.shape[0], base.shape[1] // 2), sentinel).to(base.dtype)),
          "columns outside the view were overwritten:", *what)


NOT_ASKED = object()  # gloo has no such case at all (AVG): the reference alone checks it


def gloo_or_none(fn):
    """gloo's result, or None where gloo does not support the case."""
    try:
        return fn()
    except RuntimeError:
        return None


def compare(got, want, gloo_result, case):
    check_equal(got, want, "loom vs reference:", case)
    stats["vs_reference"] += 1
    if gloo_result is None:
        stats["gloo_unsupported"].add(case.split(" ")[0] + " " + str(want.dtype).replace("torch.", ""))
    elif gloo_result is not NOT_ASKED:
        check_equal(got, gloo_result, "loom vs gloo:", case)
        stats["vs_gloo"] += 1


# ---- all_reduce: every dtype x every op, contiguous and not ------------------
seed = 0
cases = 0
for dtype in REDUCE_DTYPES:
    for name in OPS:
        if not defined(name, dtype):
            continue
        seed += 1
        cases += 1
        op = op_of(name)
        shape = (5, 9)
        want = reduced(name, [data(r, shape, dtype, seed) for r in range(world)], dtype)
        mine = data(rank, shape, dtype, seed)

        t = mine.clone()
        dist.all_reduce(t, op=op)
        g = mine.clone()
        # gloo has no AVG or PREMUL_SUM: the reference alone checks those.
        gloo_ok = NOT_ASKED if name in ("AVG", "PREMUL_SUM") else gloo_or_none(
            lambda: dist.all_reduce(g, op=op, group=gloo) or g)
        compare(t, want, gloo_ok, f"all_reduce {dtype} {name} contiguous")
        if name == "PREMUL_SUM":
            check(equal(mine, data(rank, shape, dtype, seed)), "PREMUL_SUM changed its input before the sum")

        base, view = strided(mine)
        dist.all_reduce(view, op=op)
        check_gaps(base, 7, "all_reduce", dtype, name)
        compare(view.contiguous(), want, gloo_ok, f"all_reduce {dtype} {name} strided")
log(rank, f"all_reduce: {cases} dtype x op cases ({len(REDUCE_DTYPES)} dtypes), contiguous and strided: ok")

# Large enough for pipelined chunks and the bandwidth algorithms; random
# floats, so only close to gloo's (another summation order).
big = torch.randn(300_001, generator=torch.Generator().manual_seed(100 + rank))
want = sum(torch.randn(300_001, generator=torch.Generator().manual_seed(100 + r)).double() for r in range(world))
t, g = big.clone(), big.clone()
dist.all_reduce(t)
dist.all_reduce(g, group=gloo)
check_close(t, want, 1e-5, 1e-5, "large float32 all_reduce vs float64 reference")
check_close(t, g, 1e-5, 1e-5, "large float32 all_reduce vs gloo")
for dtype in (torch.bfloat16, torch.int32):
    mine = data(rank, (70_003,), dtype, 500)
    want = reduced("SUM", [data(r, (70_003,), dtype, 500) for r in range(world)], dtype)
    t = mine.clone()
    dist.all_reduce(t)
    g = mine.clone()
    compare(t, want, gloo_or_none(lambda: dist.all_reduce(g, group=gloo) or g), f"all_reduce {dtype} SUM large")
log(rank, "all_reduce: large float32, bfloat16, int32: ok")

# ---- all_reduce_coalesced ---------------------------------------------------------
for dtype in (torch.int32, torch.float16, torch.bfloat16, torch.float32):
    for name in ("SUM", "MAX"):
        seed += 1
        a_all = [data(r, (37,), dtype, seed) for r in range(world)]
        b_all = [data(r, (4, 6), dtype, seed + 1000) for r in range(world)]
        a = a_all[rank].clone()
        base, b = strided(b_all[rank])
        dist.all_reduce_coalesced([a, b], op=OPS[name])
        check_gaps(base, 7, "all_reduce_coalesced")
        ga, gb = a_all[rank].clone(), b_all[rank].clone()
        ok = gloo_or_none(lambda: dist.all_reduce_coalesced([ga, gb], op=OPS[name], group=gloo) or True)
        compare(a, reduced(name, a_all, dtype), ga if ok else None, f"all_reduce_coalesced {dtype} {name} a")
        compare(b.contiguous(), reduced(name, b_all, dtype), gb if ok else None,
                f"all_reduce_coalesced {dtype} {name} b")
log(rank, "all_reduce_coalesced: ok")

# ---- reduce -------------------------------------------------------------------------
for dtype in REDUCE_DTYPES:
    for name in OPS:
        if not defined(name, dtype):
            continue
        seed += 1
        root = world - 1
        all_in = [data(r, (3, 5), dtype, seed) for r in range(world)]
        base, view = strided(all_in[rank])
        dist.reduce(view, dst=root, op=op_of(name))
        check_gaps(base, 7, "reduce")
        g = all_in[rank].clone()
        ok = NOT_ASKED if name in ("AVG", "PREMUL_SUM") else gloo_or_none(
            lambda: dist.reduce(g, dst=root, op=OPS[name], group=gloo) or g)
        if rank == root:
            compare(view.contiguous(), reduced(name, all_in, dtype), ok, f"reduce {dtype} {name}")
        else:
            check_equal(view.contiguous(), all_in[rank], "reduce changed a non-root input", dtype, name)
log(rank, "reduce: ok")

# ---- broadcast ------------------------------------------------------------------------
for dtype in MOVE_DTYPES:
    for root in range(world):
        seed += 1
        want = data(root, (4, 3), dtype, seed)
        base, view = strided(data(rank, (4, 3), dtype, seed), sentinel=1)
        dist.broadcast(view, src=root)
        check_gaps(base, 1, "broadcast")
        g = data(rank, (4, 3), dtype, seed)
        compare(view.contiguous(), want, gloo_or_none(lambda: dist.broadcast(g, src=root, group=gloo) or g),
                f"broadcast {dtype} root {root}")
log(rank, "broadcast: ok")

# ---- all_gather, all_gather_into_tensor (_allgather_base) --------------------------
for dtype in MOVE_DTYPES:
    seed += 1
    all_in = [data(r, (2, 5), dtype, seed) for r in range(world)]
    outs = [torch.zeros(2, 5).to(dtype) for _ in range(world)]
    base, outs[-1] = strided(torch.zeros(2, 5).to(dtype), sentinel=1)
    dist.all_gather(outs, strided(all_in[rank], sentinel=1)[1])
    check_gaps(base, 1, "all_gather output")
    gouts = [torch.zeros(2, 5).to(dtype) for _ in range(world)]
    ok = gloo_or_none(lambda: dist.all_gather(gouts, all_in[rank].clone(), group=gloo) or True)
    for i in range(world):
        compare(outs[i].contiguous(), all_in[i], gouts[i] if ok else None, f"all_gather {dtype} from {i}")

    flat = torch.zeros(world * 10).to(dtype)
    dist.all_gather_into_tensor(flat, all_in[rank].reshape(-1))
    g = torch.zeros(world * 10).to(dtype)
    ok = gloo_or_none(lambda: dist.all_gather_into_tensor(g, all_in[rank].reshape(-1), group=gloo) or g)
    compare(flat, torch.cat([x.reshape(-1) for x in all_in]), ok, f"all_gather_into_tensor {dtype}")
    # In place: this rank's input is its own slot of the output.
    flat = torch.zeros(world * 10).to(dtype)
    flat[rank * 10:(rank + 1) * 10] = all_in[rank].reshape(-1)
    dist.all_gather_into_tensor(flat, flat[rank * 10:(rank + 1) * 10])
    check_equal(flat, torch.cat([x.reshape(-1) for x in all_in]), "all_gather_into_tensor in place", dtype)
log(rank, "all_gather, all_gather_into_tensor: ok")

# ---- reduce_scatter, reduce_scatter_tensor (_reduce_scatter_base) ------------------
for dtype in REDUCE_DTYPES:
    for name in OPS:
        if not defined(name, dtype):
            continue
        seed += 1
        # ins[r][j]: what rank r contributes to rank j's result
        ins = [[data(r, (3, 4), dtype, seed * 31 + j) for j in range(world)] for r in range(world)]
        want = reduced(name, [ins[r][rank] for r in range(world)], dtype)
        base, out = strided(torch.zeros(3, 4).to(dtype), sentinel=1)
        dist.reduce_scatter(out, [x.clone() for x in ins[rank]], op=op_of(name))
        check_gaps(base, 1, "reduce_scatter output")
        g = torch.zeros(3, 4).to(dtype)
        ok = NOT_ASKED if name in ("AVG", "PREMUL_SUM") else gloo_or_none(
            lambda: dist.reduce_scatter(g, [x.clone() for x in ins[rank]], op=OPS[name], group=gloo) or g)
        compare(out.contiguous(), want, ok, f"reduce_scatter {dtype} {name}")

        out = torch.zeros(12).to(dtype)
        dist.reduce_scatter_tensor(out, torch.cat([x.reshape(-1) for x in ins[rank]]), op=op_of(name))
        g = torch.zeros(12).to(dtype)
        ok = NOT_ASKED if name in ("AVG", "PREMUL_SUM") else gloo_or_none(
            lambda: dist.reduce_scatter_tensor(g, torch.cat([x.reshape(-1) for x in ins[rank]]), op=OPS[name],
                                               group=gloo) or g)
        compare(out, want.reshape(-1), ok, f"reduce_scatter_tensor {dtype} {name}")
log(rank, "reduce_scatter, reduce_scatter_tensor: ok")

# ---- all_to_all_single: equal and uneven splits -------------------------------------
for dtype in MOVE_DTYPES:
    seed += 1
    # Equal: block j of rank r's input goes to rank j.
    ins = [data(r, (world * 3, 2), dtype, seed) for r in range(world)]
    out = torch.zeros(world * 3, 2).to(dtype)
    dist.all_to_all_single(out, ins[rank])
    want = torch.cat([ins[r][rank * 3:(rank + 1) * 3] for r in range(world)])
    check_equal(out, want, "all_to_all_single equal", dtype)
    stats["vs_reference"] += 1
    # Uneven: rank r sends r + j + 1 rows to rank j.
    sends = lambda r: [r + j + 1 for j in range(world)]  # noqa: E731
    ins = [data(r, (sum(sends(r)), 3), dtype, seed + 7) for r in range(world)]
    recv_rows = [sends(r)[rank] for r in range(world)]
    out = torch.zeros(sum(recv_rows), 3).to(dtype)
    dist.all_to_all_single(out, ins[rank], output_split_sizes=recv_rows, input_split_sizes=sends(rank))
    want = torch.cat([ins[r][sum(sends(r)[:rank]):sum(sends(r)[:rank + 1])] for r in range(world)])
    g = torch.zeros(sum(recv_rows), 3).to(dtype)
    ok = gloo_or_none(lambda: dist.all_to_all_single(g, ins[rank], recv_rows, sends(rank), group=gloo) or g)
    compare(out, want, ok, f"all_to_all_single {dtype} uneven")
log(rank, "all_to_all_single: ok")

# ---- gather, scatter ----------------------------------------------------------------
for dtype in MOVE_DTYPES:
    for root in range(world):
        seed += 1
        all_in = [data(r, (3, 2), dtype, seed) for r in range(world)]
        outs = [torch.zeros(3, 2).to(dtype) for _ in range(world)] if rank == root else None
        dist.gather(strided(all_in[rank], sentinel=1)[1], outs, dst=root)
        gouts = [torch.zeros(3, 2).to(dtype) for _ in range(world)] if rank == root else None
        ok = gloo_or_none(lambda: dist.gather(all_in[rank].clone(), gouts, dst=root, group=gloo) or True)
        if rank == root:
            for i in range(world):
                compare(outs[i], all_in[i], gouts[i] if ok else None, f"gather {dtype} root {root} from {i}")

        ins = [data(root, (2, 3), dtype, seed * 7 + j) for j in range(world)]
        base, out = strided(torch.zeros(2, 3).to(dtype), sentinel=1)
        dist.scatter(out, ins if rank == root else None, src=root)
        check_gaps(base, 1, "scatter output")
        g = torch.zeros(2, 3).to(dtype)
        ok = gloo_or_none(lambda: dist.scatter(g, [x.clone() for x in ins] if rank == root else None, src=root,
                                               group=gloo) or g)
        compare(out.contiguous(), ins[rank], ok, f"scatter {dtype} root {root}")
log(rank, "gather, scatter: ok")

# ---- all_to_all (tensor lists, a different size per pair) ---------------------------
for dtype in MOVE_DTYPES:
    seed += 1
    # Rank r sends r + j + 1 elements to rank j.
    ins = [[data(r, (r + j + 1,), dtype, seed * 13 + j) for j in range(world)] for r in range(world)]
    outs = [torch.zeros(r + rank + 1).to(dtype) for r in range(world)]
    dist.all_to_all(outs, [x.clone() for x in ins[rank]])
    gouts = [torch.zeros(r + rank + 1).to(dtype) for r in range(world)]
    ok = gloo_or_none(lambda: dist.all_to_all(gouts, [x.clone() for x in ins[rank]], group=gloo) or True)
    for r in range(world):
        compare(outs[r], ins[r][rank], gouts[r] if ok else None, f"all_to_all {dtype} from {r}")
log(rank, "all_to_all: ok")

# ---- coalesced: all_gather_into_tensor, reduce_scatter_tensor, all_reduce in one batch --
cpu = torch.device("cpu")
for dtype in (torch.int32, torch.bfloat16, torch.float32):
    seed += 1
    ins = [[data(r, (5 + k,), dtype, seed * 17 + k) for k in range(3)] for r in range(world)]
    outs = [torch.zeros(world * (5 + k)).to(dtype) for k in range(3)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for k in range(3):
            dist.all_gather_into_tensor(outs[k], ins[rank][k])
    cm.wait()
    for k in range(3):
        check_equal(outs[k], torch.cat([ins[r][k] for r in range(world)]), "coalesced all_gather_into_tensor", dtype, k)
        stats["vs_reference"] += 1

    rs_in = [[data(r, (world * (2 + k),), dtype, seed * 19 + k) for k in range(3)] for r in range(world)]
    rs_out = [torch.zeros(2 + k).to(dtype) for k in range(3)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for k in range(3):
            dist.reduce_scatter_tensor(rs_out[k], rs_in[rank][k], op=dist.ReduceOp.MAX)
    cm.wait()
    for k in range(3):
        n = 2 + k
        want = reduced("MAX", [rs_in[r][k][rank * n:(rank + 1) * n] for r in range(world)], dtype)
        check_equal(rs_out[k], want, "coalesced reduce_scatter_tensor", dtype, k)
        stats["vs_reference"] += 1

    ar = [data(rank, (4 + k,), dtype, seed * 23 + k) for k in range(3)]
    with dist._coalescing_manager(device=cpu, async_ops=True) as cm:
        for k in range(3):
            dist.all_reduce(ar[k])
    cm.wait()
    for k in range(3):
        check_equal(ar[k], reduced("SUM", [data(r, (4 + k,), dtype, seed * 23 + k) for r in range(world)], dtype),
                    "coalesced all_reduce", dtype, k)
        stats["vs_reference"] += 1
log(rank, "coalesced all_gather_into_tensor, reduce_scatter_tensor, all_reduce: ok")

# ---- send / recv ----------------------------------------------------------------------
nxt, prv = (rank + 1) % world, (rank - 1) % world
for dtype in (torch.int64, torch.bfloat16, torch.bool):
    seed += 1
    if rank == 0:
        dist.send(data(0, (6, 4), dtype, seed), dst=world - 1)
    elif rank == world - 1:
        base, view = strided(torch.zeros(6, 4).to(dtype), sentinel=1)
        dist.recv(view, src=0)
        check_gaps(base, 1, "recv")
        check_equal(view.contiguous(), data(0, (6, 4), dtype, seed), "send/recv", dtype)
# A ring exchange of 4 MiB per rank, more than a shared-memory connection
# buffers: only a coalesced batch (one Loom group) can complete it.
for rounds in range(2):
    mine = data(rank, (1 << 20,), torch.float32, 900 + rounds)
    got = torch.zeros(1 << 20)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, nxt), dist.P2POp(dist.irecv, got, prv)])
    for req in reqs:
        req.wait()
    check_equal(got, data(prv, (1 << 20,), torch.float32, 900 + rounds), "batch_isend_irecv ring")

# recv without a source: rank 0 takes one tensor from every other rank in
# whatever order they arrive, and learns who sent it.
if rank == 0:
    got = {}
    for _ in range(world - 1):
        t = torch.zeros(3, dtype=torch.int64)
        src = dist.recv(t)
        check(src not in got, f"recv from any source returned rank {src} twice")
        got[src] = t
    for src, t in got.items():
        check_equal(t, torch.full((3,), 100 + src, dtype=torch.int64), "recv from any source, from", src)
    check(sorted(got) == list(range(1, world)), f"recv from any source heard from {sorted(got)}")
else:
    time.sleep(0.05 * (world - rank))  # later ranks first: arrival order differs from rank order
    dist.send(torch.full((3,), 100 + rank, dtype=torch.int64), dst=0)
log(rank, "send/recv, batch_isend_irecv, recv from any source: ok")

# ---- barrier: nobody leaves before the last one arrives -------------------------------
for late in range(world):
    dist.barrier()
    start = time.monotonic()
    if rank == late:
        time.sleep(0.3)
    dist.barrier()
    if rank != late:
        waited = time.monotonic() - start
        check(waited >= 0.25, f"barrier returned after {waited:.3f} s while rank {late} slept 0.3 s")
log(rank, "barrier: ok")

# ---- asynchrony: the work progresses without the caller ------------------------------
x = torch.ones(4 << 20)
work = dist.all_reduce(x, async_op=True)
deadline = time.monotonic() + 120
while not work.is_completed():  # polls only: the progress engine does the work
    check(time.monotonic() < deadline, "async all_reduce never completed while polled")
    time.sleep(0.001)
work.wait()  # raises if it failed
check_equal(x[:5], torch.full((5,), float(world)), "async all_reduce result")
# Futures (DDP's path): completed by Loom's finisher thread, chained with then().
y = torch.full((1000,), float(rank))
fut = dist.all_reduce(y, async_op=True).get_future()
doubled = fut.then(lambda f: f.value()[0] * 2).wait()
check_equal(doubled, torch.full((1000,), float(world * (world - 1))), "future then()")
# Several in flight at once, waited for in reverse order.
ts = [torch.full((50_000,), float(i + rank)) for i in range(6)]
works = [dist.all_reduce(t, async_op=True) for t in ts]
for w in reversed(works):
    w.wait()
for i, t in enumerate(ts):
    check_equal(t[:3], torch.full((3,), float(world * i + world * (world - 1) // 2)), "in-flight all_reduce", i)
# wait(timeout): a late peer makes a short wait raise; the work still completes.
dist.barrier()
z = torch.full((10,), float(rank))
if rank == 0:
    work = dist.all_reduce(z, async_op=True)
    check(not work.is_completed(), "is_completed() before the peers joined")
    try:
        work.wait(timeout=datetime.timedelta(milliseconds=100))
        raise AssertionError("wait(timeout=0.1 s) returned while the peers were asleep")
    except RuntimeError as e:
        check("did not finish within 100 ms" in str(e), f"wait(timeout) raised: {e}")
    work.wait()
else:
    time.sleep(0.6)
    dist.all_reduce(z)
check_equal(z, torch.full((10,), float(world * (world - 1) // 2)), "all_reduce after a timed-out wait")
log(rank, "async_op, futures, several in flight, wait(timeout), is_completed: ok")

# ---- process groups: new_group and split_group (loomCommSplit) ---------------------
evens = list(range(0, world, 2))
sub = dist.new_group(ranks=evens, backend="loom")
if rank in evens:
    t = torch.full((4,), float(rank))
    dist.all_reduce(t, group=sub)
    check_equal(t, torch.full((4,), float(sum(evens))), "new_group(evens) all_reduce")
halves = [list(range(0, world // 2)), list(range(world // 2, world))]
split = dist.split_group(split_ranks=halves)
mine_half = halves[0] if rank in halves[0] else halves[1]
check(split is not None and dist.get_world_size(split) == len(mine_half), "split_group gave no group")
check(dist.get_rank(split) == mine_half.index(rank), "split_group rank", dist.get_rank(split))
t = torch.full((5,), rank, dtype=torch.int32)
dist.all_reduce(t, group=split, op=dist.ReduceOp.BOR)
want = functools.reduce(lambda a, b: a | b, mine_half)
check_equal(t, torch.full((5,), want, dtype=torch.int32), "split_group all_reduce BOR")
g = torch.zeros(len(mine_half) * 2, dtype=torch.int64)
dist.all_gather_into_tensor(g, torch.full((2,), rank, dtype=torch.int64), group=split)
check_equal(g, torch.tensor([r for r in mine_half for _ in range(2)]), "split_group all_gather_into_tensor")
log(rank, "new_group, split_group: ok")

# ---- errors name the operation; the group stays usable --------------------------------
def expect_error(fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        for n in needles:
            check(n in str(e), f"error message lacks {n!r}: {e}")
        return
    raise AssertionError(f"no error raised; expected one mentioning {needles}")


expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "loom: allreduce", "dtype Short")
expect_error(lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND), "loom: allreduce", "integer")
expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG),
             "loom: allreduce", "bool")
expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist._make_nccl_premul_sum(2.0)),
             "loom: allreduce", "PREMUL_SUM")
expect_error(lambda: dist.all_gather_into_tensor(torch.zeros(world * 4 + 1), torch.ones(4)),
             "loom: _allgather_base", "expected")
expect_error(lambda: dist.send(torch.ones(2), dst=world + 3), "loom: send", "not a rank")
t = torch.ones(3)
dist.all_reduce(t)
check_equal(t, torch.full((3,), float(world)), "all_reduce after rejected calls")
log(rank, "errors: ok")

# ---- timeout: a peer that never joins fails the wait with Loom's message ---------------
if "--timeout-check" in sys.argv:
    short = dist.new_group(backend="loom", timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(1000), group=short, async_op=True)
        expect_error(work.wait, "loom: allreduce on rank 0 failed", "timed out")
        elapsed = time.monotonic() - start
        check(1.5 <= elapsed <= 60, f"the 2 s timeout fired after {elapsed:.1f} s")
        log(rank, f"timeout: wait() raised after {elapsed:.1f} s: ok")
    else:
        time.sleep(4)  # never joins; the group is dropped with the job
    dist.barrier()

log(rank, f"compared {stats['vs_reference']} results with the reference, {stats['vs_gloo']} with gloo; "
          f"gloo lacks: {sorted(stats['gloo_unsupported'])}")
check(stats["vs_gloo"] >= 100, "too few comparisons with gloo ran:", stats["vs_gloo"])
finish(rank, "collectives")
