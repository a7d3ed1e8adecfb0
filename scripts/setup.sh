#!/usr/bin/env bash
# Installs what Loom needs to build, test and benchmark, from Debian's packages.
# Idempotent: packages already present are skipped, so a second run costs seconds.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  dpkg-dev file                   # cpack -G DEB: dpkg-shlibdeps, and file to find the binaries
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin      # optional baseline for perf/compare_mpi.sh
  mpich                           # MPICH's launcher (mpiexec.hydra) for the launch tests; Open MPI keeps mpirun (higher priority)
  libmpich-dev                    # optional: the MPICH and Intel MPI baselines of perf/compare_mpi.sh
  gnuplot-nox                     # optional: the PNGs of perf/sweep_algorithms.sh
  python3 procps iproute2 iperf3  # iperf3: perf/multihost_bench.sh (the network baseline)
  python3-venv python3-dev        # bindings/torch: the venv with torch from PyPI, Python's headers
  libhwloc-dev                    # topology (src/topology): cores, NUMA nodes, caches, NICs, GPUs
  libibverbs-dev librdmacm-dev    # transports/verbs: InfiniBand/RoCE (built when the headers exist)
  libucx-dev                      # transports/ucx: UCX (UCP) transport (built when pkg-config finds ucx)
  libopenblas-dev zlib1g-dev       # training layer: BLAS for the model stack, gzip for IDX files
  dataset-fashion-mnist           # the training demo's data (/usr/share/datasets/fashion-mnist)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all packages present"
fi

# bindings/torch: PyTorch from PyPI in the project-local .venv-torch. Optional:
# without it the backend is not built and its tests skip, saying why.
bash "$(dirname "$0")/setup_torch_venv.sh" ||
  echo "[setup] WARNING: no torch venv (scripts/setup_torch_venv.sh failed): the PyTorch backend is skipped"
