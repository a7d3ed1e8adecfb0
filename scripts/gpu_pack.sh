#!/usr/bin/env bash
# gpu_pack.sh [BUILD_DIR]
# Packs what scripts/gpu_check.sh runs on a GPU machine into .gpu/ of this
# checkout (git-ignored): the GPU test binaries (every *gpu*test target of the
# tree: cuda_gpu_test, kernels_cuda_gpu_test, ...), the perf tools
# (perf/*_perf.cc), loomrun, and the shared libraries they need, so that a
# machine with the NVIDIA driver and CUDA but none of Debian's -dev packages
# (no GoogleTest, hwloc, UCX, OpenBLAS) can run them.
#
# BUILD_DIR (default: build) must be a CUDA build of Loom; it is configured
# with LOOM_ENABLE_CUDA=ON when it does not exist yet, and the targets above
# are built (a no-op when they are up to date). The packing itself is the
# shared packer ../shared/gpu/pack.sh (relative to the repository root),
# which strips debug information and copies every library ldd finds but
# glibc, libstdc++, libgcc_s and the NVIDIA driver. Fails when the result is
# over 60 MiB (what the device machine's copy of the tree allows, with room)
# once compressed: .gpu-archive/gpu.tar.xz is what travels.
#
# NCCL_TESTS_DIR, when set, names a checkout of NVIDIA/nccl-tests: its
# all_reduce_perf is built there (once) and packed as .gpu/nccl-tests/, the
# baseline gpu_check.sh runs beside Loom's sweep.
#
# Then, on the device machine (the run tool):
#   scripts/gpu_check.sh   (carry .gpu-archive: the check unpacks it into .gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
build=${1:-build}
limit_mib=60

die() {
  echo "gpu_pack: $*" >&2
  exit 1
}

packer=$top/../shared/gpu/pack.sh
[[ -f $packer ]] || die "the shared packer is missing: expected $(realpath -m "$packer") (../shared/gpu/pack.sh from the repository root)"

# Targets: GPU tests declared anywhere in the tree, the perf tools, loomrun.
mapfile -t gpu_tests < <(git grep -hoE 'add_executable\(\s*[A-Za-z0-9_]*gpu[A-Za-z0-9_]*test\b' -- '*CMakeLists.txt' |
                         sed -E 's/add_executable\(\s*//' | sort -u)
mapfile -t perf_tools < <(find perf -maxdepth 1 -name '*_perf.cc' -printf '%f\n' | sed -E 's|\.cc$||' | sort)
((${#gpu_tests[@]} > 0)) || die "no *gpu*test executable is declared in any CMakeLists.txt"
programs=("${gpu_tests[@]}" "${perf_tools[@]}" loomrun)
# loom_nccl: the drop-in libnccl.so.2 that nccl-tests runs on in gpu_check.sh.
targets=("${programs[@]}" loom_nccl)

if [[ ! -f $build/CMakeCache.txt ]]; then
  echo "gpu_pack: configuring $build with CUDA"
  launchers=()
  if command -v ccache >/dev/null; then
    launchers=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_ENABLE_CUDA=ON "${launchers[@]}" ||
    die "configuring $build failed"
fi
grep -qE '^LOOM_ENABLE_CUDA:[A-Z]+=(ON|AUTO)$' "$build/CMakeCache.txt" ||
  die "$build is configured without CUDA (LOOM_ENABLE_CUDA=OFF); use another build folder or -DLOOM_ENABLE_CUDA=ON"
echo "gpu_pack: building ${targets[*]}"
cmake --build "$build" --target "${targets[@]}" -j "${LOOM_BUILD_JOBS:-2}" ||
  die "building failed (is $build a CUDA build? nvcc must have been found when it was configured)"
for t in "${gpu_tests[@]}"; do
  [[ -x $build/bin/$t ]] || die "$build/bin/$t was not built: $build is not a CUDA build (nvcc not found when configured?)"
done

# Packed outside the checkout, then moved into .gpu: the packer's own
# git-exclude step assumes .git is a folder, which it is not in a worktree.
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
# The packer copies lib/*.so* and ends (set -e) when the last of them is a
# symbolic link, as the drop-in NCCL's libloom_nccl.so links are: it gets a
# view of the build with bin/ and libloom's files only (the drop-in is
# copied below).
view=$staging/build
mkdir -p "$view/lib"
ln -s "$(realpath "$build/bin")" "$view/bin"
cp -P "$build"/lib/libloom.so* "$view/lib/"
bash "$packer" "$view" "$staging/gpu" "${programs[@]}"
# Loom's drop-in libnccl.so.2 lives in the build's lib/nccl-shim (it must
# not shadow NVIDIA's libnccl there either); the packer copies lib/*.so* only.
if ls "$build"/lib/nccl-shim/libnccl.so* >/dev/null 2>&1; then
  mkdir -p "$staging/gpu/lib/nccl-shim"
  cp -P "$build"/lib/nccl-shim/libnccl.so* "$staging/gpu/lib/nccl-shim/"
  find "$staging/gpu/lib" -maxdepth 1 -xtype l -name 'libloom_nccl.so*' -delete  # links into nccl-shim/ that did not travel
fi
# The NCCL baseline: nccl-tests' all_reduce_perf, built against the toolkit's
# nccl.h from a checkout the caller names (its code is not part of Loom).
# gpu_check.sh runs it on NVIDIA's libnccl.so.2 and on Loom's.
if [[ -n ${NCCL_TESTS_DIR:-} ]]; then
  cuda_home=${CUDA_HOME:-/usr/local/cuda}
  nccl_bin=$NCCL_TESTS_DIR/build/all_reduce_perf
  if [[ ! -x $nccl_bin ]]; then
    echo "gpu_pack: building nccl-tests' all_reduce_perf in $NCCL_TESTS_DIR (sm_90)"
    make -C "$NCCL_TESTS_DIR/src" MPI=0 CUDA_HOME="$cuda_home" NCCL_HOME="$cuda_home" \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$NCCL_TESTS_DIR/build" \
      "$nccl_bin" || die "building nccl-tests in $NCCL_TESTS_DIR failed"
  fi
  mkdir -p "$staging/gpu/nccl-tests"
  strip -o "$staging/gpu/nccl-tests/all_reduce_perf" "$nccl_bin"
fi
rm -rf "$top/.gpu"
mv "$staging/gpu" "$top/.gpu"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
git check-ignore -q .gpu/bin || die ".gpu is not ignored by git although $exclude lists it"

# What travels is the xz archive: the kernels for every dtype, op and
# architecture make the programs several times larger than they compress.
rm -rf "$top/.gpu-archive"
mkdir -p "$top/.gpu-archive"
tar -C "$top" -cf - .gpu | xz -T0 -6 >"$top/.gpu-archive/gpu.tar.xz"
grep -qxF '/.gpu-archive/' "$exclude" 2>/dev/null || echo '/.gpu-archive/' >>"$exclude"
git check-ignore -q .gpu-archive/gpu.tar.xz || die ".gpu-archive is not ignored by git although $exclude lists it"

unpacked=$(du -sb "$top/.gpu" | cut -f1)
bytes=$(du -sb "$top/.gpu-archive" | cut -f1)
mib=$(((bytes + (1 << 20) - 1) >> 20))
echo "gpu_pack: .gpu holds ${#programs[@]} programs and $(find "$top/.gpu/lib" -name '*.so*' | wc -l) libraries: $((unpacked >> 20)) MiB, $mib MiB as .gpu-archive/gpu.tar.xz (limit $limit_mib MiB)"
((mib <= limit_mib)) || die ".gpu-archive is $mib MiB, over the $limit_mib MiB that may travel to the GPU machine"
echo "gpu_pack: on the GPU machine, from the repository root: scripts/gpu_check.sh (the run tool: carry .gpu-archive; the check unpacks it)"
