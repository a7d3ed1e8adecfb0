"""Loom as a torch.distributed backend.

    import torch.distributed as dist
    import loom_torch  # registers the backend "loom"
    dist.init_process_group("loom")  # under loomrun or torchrun (env://)

Importing this package registers "loom" with
torch.distributed.Backend.register_backend; every process group created with
backend "loom" then runs its collectives on a Loom communicator that
bootstraps through PyTorch's store (the group's timeout becomes Loom's
deadline).
"""
import torch.distributed as _dist

from . import _C
from ._C import ProcessGroupLoom

__all__ = ["ProcessGroupLoom", "BACKEND"]

BACKEND = "loom"


# Registration is process-wide and may not be repeated (e.g. a reload).
if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _C.create_process_group)
