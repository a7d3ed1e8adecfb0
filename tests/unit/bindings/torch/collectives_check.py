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
import sys
import time

import torch
import torch.distributed as dist

from harness import check, check_close, check_equal, finish, init, log

REDUCE_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64]
# Operations that only move data take every dtype (they travel as bytes).
MOVE_DTYPES = REDUCE_DTYPES + [torch.bool, torch.int16, torch.complex64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}

rank, world, gloo = init()
stats = {"vs_reference": 0, "vs_gloo": 0, "gloo_unsupported": set()}


def data(r, shape, dtype, seed):
    """Rank r's input: integers in [-2, 2] ([0, 2] unsigned, {0, 1} bool)."""
    g = torch.Generator().manual_seed(seed * 1009 + r)
    lo, hi = (0, 2) if dtype == torch.bool else (0, 3) if dtype == torch.uint8 else (-2, 3)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def reduced(name, tensors, dtype):
    """The reduction of `tensors` in float64 (exact for these inputs), cast back."""
    s = torch.stack([t.to(torch.float64) for t in tensors])
    if name == "SUM":
        r = s.sum(0)
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
    base = torch.full((rows, 2 * cols), sentinel).to(values.dtype)
    view = base[:, ::2]
    view.copy_(values)
    check(not view.is_contiguous(), "strided() made a contiguous view")
    return base, view


def check_gaps(base, sentinel, *what):
    check(torch.equal(base[:, 1::2], torch.full_like(base[:, 1::2], sentinel)),
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
for dtype in REDUCE_DTYPES:
    for name, op in OPS.items():
        seed += 1
        shape = (5, 9)
        want = reduced(name, [data(r, shape, dtype, seed) for r in range(world)], dtype)
        mine = data(rank, shape, dtype, seed)

        t = mine.clone()
        dist.all_reduce(t, op=op)
        g = mine.clone()
        # gloo has no AVG: the reference alone checks it.
        gloo_ok = NOT_ASKED if name == "AVG" else gloo_or_none(lambda: dist.all_reduce(g, op=op, group=gloo) or g)
        compare(t, want, gloo_ok, f"all_reduce {dtype} {name} contiguous")

        base, view = strided(mine)
        dist.all_reduce(view, op=op)
        check_gaps(base, 7, "all_reduce", dtype, name)
        compare(view.contiguous(), want, gloo_ok, f"all_reduce {dtype} {name} strided")
log(rank, f"all_reduce: {len(REDUCE_DTYPES)} dtypes x {len(OPS)} ops, contiguous and strided: ok")

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
    for name in ("SUM", "MAX", "AVG"):
        seed += 1
        root = world - 1
        all_in = [data(r, (3, 5), dtype, seed) for r in range(world)]
        base, view = strided(all_in[rank])
        dist.reduce(view, dst=root, op=OPS[name])
        check_gaps(base, 7, "reduce")
        g = all_in[rank].clone()
        ok = NOT_ASKED if name == "AVG" else gloo_or_none(lambda: dist.reduce(g, dst=root, op=OPS[name], group=gloo) or g)
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
    check_equal(flat, torch.cat([x.reshape(-1) for x in all_in]), "all_gather_into_tensor", dtype)
    # In place: this rank's input is its own slot of the output.
    flat = torch.zeros(world * 10).to(dtype)
    flat[rank * 10:(rank + 1) * 10] = all_in[rank].reshape(-1)
    dist.all_gather_into_tensor(flat, flat[rank * 10:(rank + 1) * 10])
    check_equal(flat, torch.cat([x.reshape(-1) for x in all_in]), "all_gather_into_tensor in place", dtype)
log(rank, "all_gather, all_gather_into_tensor: ok")

# ---- reduce_scatter, reduce_scatter_tensor (_reduce_scatter_base) ------------------
for dtype in REDUCE_DTYPES:
    for name in ("SUM", "MIN", "AVG"):
        seed += 1
        # ins[r][j]: what rank r contributes to rank j's result
        ins = [[data(r, (3, 4), dtype, seed * 31 + j) for j in range(world)] for r in range(world)]
        want = reduced(name, [ins[r][rank] for r in range(world)], dtype)
        base, out = strided(torch.zeros(3, 4).to(dtype), sentinel=1)
        dist.reduce_scatter(out, [x.clone() for x in ins[rank]], op=OPS[name])
        check_gaps(base, 1, "reduce_scatter output")
        g = torch.zeros(3, 4).to(dtype)
        ok = NOT_ASKED if name == "AVG" else gloo_or_none(
            lambda: dist.reduce_scatter(g, [x.clone() for x in ins[rank]], op=OPS[name], group=gloo) or g)
        compare(out.contiguous(), want, ok, f"reduce_scatter {dtype} {name}")

        out = torch.zeros(12).to(dtype)
        dist.reduce_scatter_tensor(out, torch.cat([x.reshape(-1) for x in ins[rank]]), op=OPS[name])
        check_equal(out, want.reshape(-1), "reduce_scatter_tensor", dtype, name)
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
log(rank, "send/recv, batch_isend_irecv: ok")

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
log(rank, "async_op, futures, several in flight: ok")

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
expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND),
             "loom: allreduce", "ReduceOp.BAND")
expect_error(lambda: dist.gather(torch.ones(4), [torch.ones(4) for _ in range(world)] if rank == 0 else None),
             "loom", "gather")
expect_error(lambda: dist.all_gather_into_tensor(torch.zeros(world * 4 + 1), torch.ones(4)),
             "loom: _allgather_base", "expected")
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
