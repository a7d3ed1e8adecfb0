"""Loom as a torch.distributed backend.

    import torch.distributed as dist
    import loom_torch  # registers the backend "loom"
    dist.init_process_group("loom")  # under loomrun or torchrun (env://)

Importing this package registers "loom" with
torch.distributed.Backend.register_backend for CPU and CUDA tensors; every
process group created with backend "loom" then runs its collectives on a
Loom communicator that bootstraps through PyTorch's store (the group's
timeout becomes Loom's deadline).
"""
import torch  # noqa: F401  (loads the torch libraries _C links against)
import torch.distributed as _dist

from . import _C
from ._C import LoomBackend

__all__ = ["LoomBackend", "BACKEND", "cuda_built"]

BACKEND = "loom"
cuda_built = _C.cuda_built


# Registration is process-wide and may not be repeated (e.g. a reload).
if BACKEND not in _dist.Backend.backend_list:
    _dist.Backend.register_backend(BACKEND, _C.create_backend, devices=["cpu", "cuda"])
