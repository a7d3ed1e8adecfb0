#!/usr/bin/env bash
# Builds the loom_torch wheel (pyproject.toml) with a Python that has torch,
# installs it into a scratch folder, and runs an all-reduce, an
# all_gather_into_tensor and BAND through "loom" in 2 processes started by
# that Python's torchrun, with nothing from the build tree on PYTHONPATH:
# `import loom_torch` alone must register the backend and find libloom.
#   scripts/check_torch_wheel.sh [PYTHON]   (default: .venv-torch/bin/python)
# Not part of CI: it builds libloom once more (minutes on two cores).
# LOOM_WHEEL_CMAKE_ARGS adds -C options for pip (e.g. cmake.define.LOOM_ENABLE_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-.venv-torch/bin/python}
"$py" -c "import torch, scikit_build_core" 2>/dev/null || {
  echo "[wheel] $py needs torch and scikit-build-core ($py -m pip install scikit-build-core)"
  exit 1
}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake_args=()
for a in ${LOOM_WHEEL_CMAKE_ARGS:-}; do cmake_args+=(-C "$a"); done
start=$SECONDS
"$py" -m pip wheel --no-build-isolation --no-deps -q . -w "$scratch/wheel" "${cmake_args[@]}"
echo "[wheel] built $(basename "$scratch"/wheel/*.whl) in $((SECONDS - start)) s"
"$py" -m pip install -q --no-deps --target "$scratch/site" "$scratch"/wheel/*.whl
cat > "$scratch/job.py" <<'PY'
import torch
import torch.distributed as dist
import loom_torch  # from the wheel: registers "loom"

assert loom_torch.__file__.startswith(__import__("os").environ["WHEEL_SITE"]), loom_torch.__file__
dist.init_process_group("loom")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.equal(t, torch.full((1000,), world * (world + 1) / 2)), t[:4]
out = torch.empty(world * 3, dtype=torch.int64)
dist.all_gather_into_tensor(out, torch.full((3,), rank, dtype=torch.int64))
assert out.tolist() == [r for r in range(world) for _ in range(3)], out
b = torch.tensor([0b1111 ^ (1 << rank)], dtype=torch.int32)
dist.all_reduce(b, op=dist.ReduceOp.BAND)
assert b.item() == 0b1111 & ~((1 << world) - 1), b
dist.destroy_process_group()
if rank == 0:
    print(f"[wheel] torchrun job on {world} ranks with loom_torch from {loom_torch.__file__}: ok")
PY
WHEEL_SITE="$scratch/site" PYTHONPATH="$scratch/site" OMP_NUM_THREADS=1 \
  "$py" -m torch.distributed.run --standalone --nproc_per_node 2 "$scratch/job.py"
