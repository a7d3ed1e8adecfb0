#!/usr/bin/env bash
# Creates .venv-torch (git-ignored, in the repository root): a virtual
# environment with PyTorch from PyPI, pinned, for bindings/torch (the
# torch.distributed backend "loom"), its tests and its benchmark.
#
# PyPI's Linux wheel of torch depends on about 3 GB of nvidia-* CUDA wheels.
# On a machine that has the CUDA toolkit's libraries on the loader's path
# (this project's machines: /usr/local/cuda with cuDNN and NCCL), torch only
# lacks the few libraries that are newer than the toolkit's or not part of
# it, so this installs torch without its dependencies plus exactly those
# (~0.9 GB in all, well under a minute here) and then checks that
# `import torch` works. Where it does not (no toolkit, another version), it
# falls back to `pip install torch==VERSION` with every dependency.
#
#   LOOM_TORCH_VENV   where to create it (default: REPO/.venv-torch)
#   LOOM_TORCH_PYTHON the Python to create it with (default: python3, >= 3.10)
#   LOOM_SKIP_TORCH=1 do nothing (the torch tests then skip)
# Idempotent: an existing venv with the pinned torch is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.15.0
venv=${LOOM_TORCH_VENV:-$PWD/.venv-torch}
python=${LOOM_TORCH_PYTHON:-python3}

if [[ ${LOOM_SKIP_TORCH:-0} == 1 ]]; then
  echo "[torch venv] skipped (LOOM_SKIP_TORCH=1)"
  exit 0
fi

works() {
  "$venv/bin/python" - "$TORCH_VERSION" <<'EOF' >/dev/null 2>&1
import sys
import torch
import torch.distributed as dist
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
assert dist.is_available() and dist.is_gloo_available()
EOF
}

if [[ -x $venv/bin/python ]] && works; then
  echo "[torch venv] $venv has torch $TORCH_VERSION"
  exit 0
fi

start=$SECONDS
"$python" -m venv "$venv"
pip=("$venv/bin/pip" install -q --disable-pip-version-check)

# torch's own pure-Python requirements (its METADATA), pinned; numpy only
# silences torch's warning at import.
"${pip[@]}" filelock==4.3.1 fsspec==2026.9.0 jinja2==3.1.6 markupsafe==3.0.4 mpmath==1.3.0 \
  networkx==3.6.1 sympy==1.14.0 typing-extensions==4.16.0 numpy==2.4.6 'setuptools>=77.0.3'
"${pip[@]}" --no-deps "torch==$TORCH_VERSION"
# The CUDA libraries torch links that the toolkit lacks or has older:
# NCCL (torch needs symbols of 2.30), cuSPARSELt, NVSHMEM, cuFile.
"${pip[@]}" --no-deps nvidia-nccl-cu13==2.30.7 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 \
  'nvidia-cufile==1.17.1.22.*'

if ! works; then
  echo "[torch venv] torch $TORCH_VERSION does not import with the system's CUDA libraries;" \
    "installing it with all its dependencies (several GB)"
  "${pip[@]}" "torch==$TORCH_VERSION"
  if ! works; then
    "$venv/bin/python" -c "import torch" || true
    echo "[torch venv] FAILED: torch $TORCH_VERSION does not import in $venv"
    exit 1
  fi
fi
echo "[torch venv] $venv: torch $TORCH_VERSION ready in $((SECONDS - start)) s"
