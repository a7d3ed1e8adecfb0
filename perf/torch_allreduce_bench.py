#!/usr/bin/env python3
"""dist.all_reduce and dist.all_gather_into_tensor of float32 tensors, 4 KiB
.. 64 MiB, with backends "loom" and "gloo" in the same run (the same
processes, alternating per repetition), and the ratio per size (gloo's time
/ loom's: > 1 means loom is faster). Size is the all-reduced tensor, and the
gathered output for all_gather_into_tensor (as nccl-tests counts).

    .venv-torch/bin/python perf/torch_allreduce_bench.py [--build build] [--np 2,4] [--reps 5]
        [--ops all_reduce,all_gather_into_tensor]

The driver starts N processes per world size torchrun-style (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) with loom_torch from <build>/python.
Each rank times blocking all-reduces (after warm-up, behind a barrier); the
time of one repetition is the slowest rank's; the table shows the median of
the repetitions.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

MIN_BYTES, MAX_BYTES, STEP = 4 << 10, 64 << 20, 4


def sizes():
    s = MIN_BYTES
    while s <= MAX_BYTES:
        yield s
        s *= STEP


def iterations(nbytes):
    """About 64 MiB of traffic per timed block, at least 3 calls, at most 200."""
    return max(3, min(200, (64 << 20) // nbytes))


def human(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def timed_call(op, x, out, group):
    import torch.distributed as dist

    if op == "all_reduce":
        dist.all_reduce(x, group=group)
    else:
        dist.all_gather_into_tensor(out, x, group=group)


def worker(reps, ops):
    import torch
    import torch.distributed as dist
    import loom_torch  # noqa: F401  (registers "loom")

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"loom": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    results = []  # (op, bytes, backend, [seconds per call, one per repetition])
    for op in ops:
        for nbytes in sizes():
            if op == "all_reduce":
                x, out = torch.ones(nbytes // 4), None
            else:
                x, out = torch.ones(nbytes // 4 // world), torch.empty(nbytes // 4 // world * world)
            n = iterations(nbytes)
            times = {b: [] for b in groups}
            for _ in range(reps):
                for backend, group in groups.items():  # alternate, so drift hits both alike
                    for _ in range(min(n, 10)):
                        timed_call(op, x, out, group)
                    dist.barrier(group=group)
                    start = time.perf_counter()
                    for _ in range(n):
                        timed_call(op, x, out, group)
                    per_call = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64)
                    dist.all_reduce(per_call, op=dist.ReduceOp.MAX, group=groups["gloo"])  # the slowest rank
                    times[backend].append(per_call.item())
            results.extend((op, nbytes, b, t) for b, t in times.items())
    if rank == 0:
        print("RESULTS " + json.dumps(results), flush=True)
    dist.destroy_process_group()


def run_world(nprocs, reps, ops, pythonpath):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONPATH=pythonpath + os.pathsep + os.environ.get("PYTHONPATH", ""))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", "--reps", str(reps), "--ops", ",".join(ops)], env=env,
                                      stdout=subprocess.PIPE, text=True))
    out = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"a rank failed with {nprocs} processes: exit codes {[p.returncode for p in procs]}")
    line = next(l for l in out[0].splitlines() if l.startswith("RESULTS"))
    return json.loads(line.split(" ", 1)[1])


def table(nprocs, op, results):
    med = {(nb, b): statistics.median(t) for o, nb, b, t in results if o == op}
    factor = 2 * (nprocs - 1) / nprocs if op == "all_reduce" else (nprocs - 1) / nprocs
    print(f"\n{op}, {nprocs} processes, float32{' sum' if op == 'all_reduce' else ''}, median of repetitions "
          f"(busbw = {'2' if op == 'all_reduce' else ''}(n-1)/n x size / time)")
    print("| size | loom us | gloo us | loom busbw GB/s | gloo busbw GB/s | gloo/loom |")
    print("|---|---|---|---|---|---|")
    for nb in sizes():
        lt, gt = med[(nb, "loom")], med[(nb, "gloo")]
        bus = lambda t: factor * nb / t / 1e9  # noqa: E731
        print(f"| {human(nb)} | {lt * 1e6:.1f} | {gt * 1e6:.1f} | {bus(lt):.2f} | {bus(gt):.2f} | {gt / lt:.2f} |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="Loom build folder holding python/loom_torch")
    ap.add_argument("--np", default="2,4", help="world sizes, comma separated")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per size and backend")
    ap.add_argument("--ops", default="all_reduce,all_gather_into_tensor",
                    help="operations, comma separated (all_reduce, all_gather_into_tensor)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    ops = args.ops.split(",")
    unknown = set(ops) - {"all_reduce", "all_gather_into_tensor"}
    if unknown:
        sys.exit(f"unknown operations {sorted(unknown)}: use all_reduce, all_gather_into_tensor")
    if args.worker:
        return worker(args.reps, ops)
    pythonpath = os.path.abspath(os.path.join(args.build, "python"))
    if not os.path.isdir(os.path.join(pythonpath, "loom_torch")):
        sys.exit(f"{pythonpath}/loom_torch not found: build Loom with the torch venv present "
                 "(scripts/setup_torch_venv.sh), and run this with the venv's python")
    for nprocs in (int(n) for n in args.np.split(",")):
        results = run_world(nprocs, args.reps, ops, pythonpath)
        for op in ops:
            table(nprocs, op, results)


if __name__ == "__main__":
    main()
