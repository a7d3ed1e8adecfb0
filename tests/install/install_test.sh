#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and uses it as a stranger
# would (ctest label install; docs/install.md):
#   - the expected files are there, and no installed CMake or pkg-config file
#     names the build or source tree;
#   - the installed programs run from the prefix (their RPATH finds libloom)
#     and print "<tool> (Loom) VERSION"; the installed loomrun runs the
#     installed all_reduce_perf on 2 ranks;
#   - LoomConfigVersion.cmake accepts the same major version, not a newer minor;
#   - cmake_consumer/ (find_package(Loom), Loom::loom, Loom::nccl) and
#     pkgconfig_consumer/ (pkg-config loom, nccl) build and run against it.
# usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR VERSION LIBDIR NCCL_LIBDIR PROGRAMS
#   LIBDIR, NCCL_LIBDIR: relative to the prefix; PROGRAMS: comma-separated
set -euo pipefail
build=$1 src=$2 work=$3 version=$4 libdir=$5 nccl_libdir=$6 programs=$7
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
IFS=, read -r -a program_list <<<"$programs"

fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
expect_file() { [[ -e $prefix/$1 ]] || fail "missing $1 in the installed tree"; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }

# ---- the installed tree ----------------------------------------------------------
for f in include/loom/loom.h include/loom/loom.hpp include/loom/nccl/nccl.h \
         "$libdir/libloom.so.$version" "$libdir/libloom.so.$major" "$libdir/libloom.so" \
         "$libdir/cmake/Loom/LoomConfig.cmake" "$libdir/cmake/Loom/LoomConfigVersion.cmake" \
         "$libdir/cmake/Loom/LoomTargets.cmake" "$libdir/pkgconfig/loom.pc" "$libdir/pkgconfig/nccl.pc" \
         share/doc/loom/LICENSE share/doc/loom/CHANGELOG.md share/doc/loom/install.md share/doc/loom/user-guide.md; do
  expect_file "$f"
done
[[ $(readlink "$prefix/$libdir/libloom.so") == "libloom.so.$major" ]] || fail "libloom.so does not link to libloom.so.$major"
soname=$(readelf -d "$prefix/$libdir/libloom.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libloom.so.$major" ]] || fail "libloom's SONAME is '$soname', expected libloom.so.$major"
compgen -G "$prefix/$nccl_libdir/lib*nccl*.so.*" >/dev/null || fail "no NCCL shim library in $nccl_libdir"
for p in "${program_list[@]}"; do
  expect_file "bin/$p"
  expect_file "share/man/man1/$p.1"
  grep -q '^\.TH' "$prefix/share/man/man1/$p.1" || fail "$p.1 has no .TH line"
  # No LD_LIBRARY_PATH: the RPATH must find the prefix's libloom.
  out=$(env -u LD_LIBRARY_PATH "$prefix/bin/$p" --version) || fail "$p --version exited $?"
  [[ $out == "$p (Loom) $version" ]] || fail "$p --version printed '$out', expected '$p (Loom) $version'"
done
# The installed launcher runs an installed tool as a 2-rank job.
if [[ ,$programs, == *,loomrun,* && ,$programs, == *,all_reduce_perf,* ]]; then
  out=$(env -u LD_LIBRARY_PATH "$prefix/bin/loomrun" -n 2 "$prefix/bin/all_reduce_perf" -b 8 -e 8 -n 2 -w 1 2>&1) ||
    { echo "$out"; fail "installed loomrun -n 2 all_reduce_perf exited $?"; }
  [[ $out == *"Out of bounds values : 0 OK"* ]] || { echo "$out"; fail "installed all_reduce_perf did not check its results"; }
fi
if leaks=$(grep -rlF -e "$build" -e "$src" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig"); then
  fail "installed files name the build or source tree: $leaks"
fi

# ---- LoomConfigVersion.cmake: same major, not older ----------------------------------
cat >"$work/version_check.cmake" <<EOF
foreach(request "${major}.0" "${major}" "${major}.$((minor + 1))" "$((major + 1)).0")
  set(PACKAGE_FIND_VERSION \${request})
  string(REPLACE "." ";" parts "\${request}.0")
  list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
  unset(PACKAGE_VERSION_COMPATIBLE)
  include("$prefix/$libdir/cmake/Loom/LoomConfigVersion.cmake")
  message("\${request} \${PACKAGE_VERSION_COMPATIBLE}")
endforeach()
EOF
answers=$(cmake -P "$work/version_check.cmake" 2>&1)
expected=$(printf '%s\n' "$major.0 TRUE" "$major TRUE" "$major.$((minor + 1)) FALSE" "$((major + 1)).0 FALSE")
[[ $answers == "$expected" ]] || fail "LoomConfigVersion.cmake answered:\n$answers\nexpected:\n$expected"

# ---- consumers ---------------------------------------------------------------------
run_consumers() {  # DIR HOW
  local dir=$1 how=$2 exe out
  for exe in loom_consumer nccl_consumer; do
    out=$(LD_LIBRARY_PATH="$prefix/$libdir:$prefix/$nccl_libdir" "$dir/$exe") || fail "$how $exe exited $?"
    echo "$how: $out"
  done
  [[ $(LD_LIBRARY_PATH="$prefix/$libdir" ldd "$dir/loom_consumer") == *"$prefix/$libdir/libloom.so.$major"* ]] ||
    fail "$how loom_consumer does not load the installed libloom"
}

cmake -S "$src/tests/install/cmake_consumer" -B "$work/cmake_consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/cmake_consumer.log" 2>&1 || { cat "$work/cmake_consumer.log"; fail "configuring cmake_consumer"; }
grep -q "Found Loom $version in $prefix/$libdir/cmake/Loom" "$work/cmake_consumer.log" ||
  { cat "$work/cmake_consumer.log"; fail "find_package(Loom) did not find the installed $version"; }
cmake --build "$work/cmake_consumer" -j 2 >>"$work/cmake_consumer.log" 2>&1 ||
  { cat "$work/cmake_consumer.log"; fail "building cmake_consumer"; }
run_consumers "$work/cmake_consumer" "find_package"

export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
[[ $(pkg-config --modversion loom) == "$version" ]] || fail "pkg-config --modversion loom: $(pkg-config --modversion loom)"
[[ $(realpath "$(pkg-config --variable=libdir loom)") == "$(realpath "$prefix/$libdir")" ]] ||
  fail "pkg-config's loom libdir is $(pkg-config --variable=libdir loom), not $prefix/$libdir"
[[ $(realpath "$(pkg-config --variable=libdir nccl)") == "$(realpath "$prefix/$nccl_libdir")" ]] ||
  fail "pkg-config's nccl libdir is $(pkg-config --variable=libdir nccl), not $prefix/$nccl_libdir"
mkdir -p "$work/pkgconfig_consumer"
make -s -f "$src/tests/install/pkgconfig_consumer/Makefile" OUT="$work/pkgconfig_consumer" \
  >"$work/pkgconfig_consumer.log" 2>&1 || { cat "$work/pkgconfig_consumer.log"; fail "building pkgconfig_consumer"; }
run_consumers "$work/pkgconfig_consumer" "pkg-config"
echo "install_test: OK ($prefix)"
