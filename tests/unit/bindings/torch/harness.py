"""Shared set-up of the torch backend checks.

Every check runs as one process per rank (launched by loomrun or torchrun),
creates the default process group with backend "loom" from the environment
(env://) and a gloo group over the same ranks for the reference results.
Failures raise AssertionError, so the process, and the launcher, exit non-zero.
"""
import warnings

import torch
import torch.distributed as dist

import loom_torch  # noqa: F401  (registers the backend "loom")


def init():
    """Default group "loom", plus a gloo group over the same ranks."""
    # One intra-op thread per rank: the ranks already share two cores.
    torch.set_num_threads(1)
    # all_reduce_coalesced is deprecated in torch 2.x but still c10d API.
    warnings.filterwarnings("ignore", message=".*deprecated.*")
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("loom", init_method="env://")
    assert dist.get_backend() == "loom", dist.get_backend()
    gloo = dist.new_group(backend="gloo")
    return dist.get_rank(), dist.get_world_size(), gloo


def log(rank, *args):
    if rank == 0:
        print(*args, flush=True)


def check(cond, *what):
    if not cond:
        raise AssertionError(" ".join(str(w) for w in what))


def check_equal(got, want, *what):
    """Exact: the checks' data are small integers, exact in every dtype."""
    same_type = got.dtype == want.dtype and got.shape == want.shape
    if got.dtype in (torch.uint32, torch.uint64):  # torch.equal has no kernel for them
        got, want = got.to(torch.int64), want.to(torch.int64)
    check(same_type and torch.equal(got, want),
          *what, f"\n got  {got.flatten()[:12].tolist()}\n want {want.flatten()[:12].tolist()}")


def check_close(got, want, rtol, atol, *what):
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    check(torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol), *what, f"max |diff| {diff}")


def finish(rank, name):
    dist.barrier()
    dist.destroy_process_group()
    log(rank, f"{name}: all checks passed")
