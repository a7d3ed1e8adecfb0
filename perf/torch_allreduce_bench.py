#!/usr/bin/python3
"""dist.all_reduce of float32 tensors, 4 KiB .. 64 MiB, with backends "loom"
and "gloo" in the same run (the same processes, alternating per repetition),
and the ratio per size (gloo's time / loom's: > 1 means loom is faster).

    /usr/bin/python3 perf/torch_allreduce_bench.py [--build build] [--np 2,4] [--reps 5]

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


def worker(reps):
    import torch
    import torch.distributed as dist
    import loom_torch  # noqa: F401  (registers "loom")

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"loom": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    results = []  # (bytes, backend, [seconds per call, one per repetition])
    for nbytes in sizes():
        x = torch.ones(nbytes // 4)
        n = iterations(nbytes)
        times = {b: [] for b in groups}
        for _ in range(reps):
            for backend, group in groups.items():  # alternate, so drift hits both alike
                for _ in range(min(n, 10)):
                    dist.all_reduce(x, group=group)
                dist.barrier(group=group)
                start = time.perf_counter()
                for _ in range(n):
                    dist.all_reduce(x, group=group)
                per_call = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64)
                dist.all_reduce(per_call, op=dist.ReduceOp.MAX, group=groups["gloo"])  # the slowest rank
                times[backend].append(per_call.item())
        results.extend((nbytes, b, t) for b, t in times.items())
    if rank == 0:
        print("RESULTS " + json.dumps(results), flush=True)
    dist.destroy_process_group()


def run_world(nprocs, reps, pythonpath):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(nprocs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONPATH=pythonpath + os.pathsep + os.environ.get("PYTHONPATH", ""))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", "--reps", str(reps)], env=env,
                                      stdout=subprocess.PIPE, text=True))
    out = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"a rank failed with {nprocs} processes: exit codes {[p.returncode for p in procs]}")
    line = next(l for l in out[0].splitlines() if l.startswith("RESULTS"))
    return json.loads(line.split(" ", 1)[1])


def table(nprocs, results):
    med = {(nb, b): statistics.median(t) for nb, b, t in results}
    print(f"\n{nprocs} processes, float32 sum, median of repetitions (busbw = 2(n-1)/n x size / time)")
    print(f"| size | loom us | gloo us | loom busbw GB/s | gloo busbw GB/s | gloo/loom |")
    print(f"|---|---|---|---|---|---|")
    for nb in sizes():
        lt, gt = med[(nb, "loom")], med[(nb, "gloo")]
        bus = lambda t: 2 * (nprocs - 1) / nprocs * nb / t / 1e9  # noqa: E731
        print(f"| {human(nb)} | {lt * 1e6:.1f} | {gt * 1e6:.1f} | {bus(lt):.2f} | {bus(gt):.2f} | {gt / lt:.2f} |")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="Loom build folder holding python/loom_torch")
    ap.add_argument("--np", default="2,4", help="world sizes, comma separated")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per size and backend")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.reps)
    pythonpath = os.path.abspath(os.path.join(args.build, "python"))
    if not os.path.isdir(os.path.join(pythonpath, "loom_torch")):
        sys.exit(f"{pythonpath}/loom_torch not found: build Loom with libtorch-dev installed (--build)")
    for nprocs in (int(n) for n in args.np.split(",")):
        table(nprocs, run_world(nprocs, args.reps, pythonpath))


if __name__ == "__main__":
    main()
