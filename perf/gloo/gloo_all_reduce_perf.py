#!/usr/bin/python3
"""gloo_all_reduce_perf: the gloo baseline for perf/compare_mpi.sh.

    python3 perf/gloo/gloo_all_reduce_perf.py --np N -b 8 -e 64M -f 4 -n 20 -w 5 -c 1

Starts N processes on this host (torch.distributed's "gloo" backend over TCP
loopback; PyTorch from the project's .venv-torch or Debian's python3-torch) and prints all_reduce_perf's
table rows (size count type redop root time algbw busbw #wrong, twice), so the
comparison script reads it like the other tools. float32 sum only.

gloo's all-reduce works in place, so both columns time the in-place call;
a rank's time per call is its mean over -n calls after -w warm-ups, and the
printed time is the mean over ranks (all_reduce_perf's -a 1). The time
includes PyTorch's dispatch from Python, as a PyTorch user choosing gloo gets.
With -c 1, one extra call on fresh inputs is checked against the sum.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def sizes(args):
    size = args.minbytes
    while size <= args.maxbytes:
        yield size
        size *= args.stepfactor


def rank_main(args, rank, world, port):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    if rank == 0:
        print(f"# gloo (PyTorch {torch.__version__}) all-reduce, {world} processes, float32 sum, in place")
        print("#       size    count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong")
    factor = 2 * (world - 1) / world
    for size in sizes(args):
        count = max(1, size // 4)
        data = torch.full((count,), float(rank + 1), dtype=torch.float32)
        for _ in range(args.warmup_iters):
            dist.all_reduce(data)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(data)
        mine = (time.perf_counter() - start) / args.iters * 1e6
        total = torch.tensor([mine], dtype=torch.float64)
        dist.all_reduce(total)
        us = total.item() / world
        wrong = "N/A"
        if args.check:
            data.fill_(float(rank + 1))
            dist.all_reduce(data)
            expected = world * (world + 1) / 2
            errors = torch.tensor([int((data != expected).sum().item())], dtype=torch.int64)
            dist.all_reduce(errors)
            wrong = str(errors.item())
        algbw = size / us / 1e3
        if rank == 0:
            row = f"{us:7.2f} {algbw:6.2f} {algbw * factor:6.2f} {wrong:>6}"
            print(f"{size:12d} {count:8d}  float    sum    -1 {row} {row}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--np", type=int, required=True, help="number of processes (ranks)")
    parser.add_argument("-b", dest="minbytes", type=parse_size, default=8)
    parser.add_argument("-e", dest="maxbytes", type=parse_size, default=32 << 20)
    parser.add_argument("-f", dest="stepfactor", type=int, default=2)
    parser.add_argument("-n", dest="iters", type=int, default=20)
    parser.add_argument("-w", dest="warmup_iters", type=int, default=5)
    parser.add_argument("-c", dest="check", type=int, default=1)
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()  # all_reduce_perf's other flags (-d, -o, -a) mean the defaults here
    if args.stepfactor < 2:
        parser.error("-f must be at least 2")
    if args.rank >= 0:
        rank_main(args, args.rank, args.np, args.port)
        return 0
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--rank", str(r), "--port", str(port)])
             for r in range(args.np)]
    codes = [p.wait() for p in ranks]
    bad = [r for r, code in enumerate(codes) if code != 0]
    if bad:
        print(f"gloo_all_reduce_perf: ranks {bad} failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
