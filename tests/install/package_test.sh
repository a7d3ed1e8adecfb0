#!/usr/bin/env bash
# Builds the Debian packages of the build tree (cpack -G DEB) and checks them
# (ctest label package; docs/install.md#debian-packages):
#   - each package holds what its component should (dpkg-deb -c), and no file
#     is in two packages;
#   - Depends: the -dev and tools packages need the library package of exactly
#     this version; dpkg-shlibdeps added the C library to the binary ones;
#   - unpacked into a scratch root (dpkg -x), the tools run from it and a
#     pkg-config build against it works.
# usage: package_test.sh BUILD_DIR SOURCE_DIR WORK_DIR VERSION
set -euo pipefail
build=$1 src=$2 work=$3 version=$4
major=${version%%.*}
runtime=libloom$major

fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/root"
(cd "$build" && cpack -G DEB -B "$work/packages") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack -G DEB"; }

deb() { compgen -G "$work/packages/${1}_${version}_*.deb" || fail "no package $1 $version in $work/packages"; }
runtime_deb=$(deb "$runtime") dev_deb=$(deb libloom-dev) tools_deb=$(deb loom-tools)

contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
expect_in() {  # DEB PATTERN... : every grep -E pattern matches some file of DEB
  local deb=$1 list
  shift
  list=$(contents "$deb")
  for pattern in "$@"; do
    grep -Eq "^($pattern)\$" <<<"$list" || fail "$(basename "$deb") has no file matching $pattern"
  done
}
lib='/usr/lib(/[a-z0-9_-]+)?'
expect_in "$runtime_deb" "$lib/libloom\.so\.$major" "$lib/libloom\.so\.$version" "$lib(/loom/nccl)?/lib[a-z_]*nccl\.so\.[0-9]+" \
  /usr/share/doc/loom/LICENSE /usr/share/doc/loom/CHANGELOG\.md /usr/share/doc/loom/install\.md
expect_in "$dev_deb" /usr/include/loom/loom\.h /usr/include/loom/loom\.hpp /usr/include/loom/nccl/nccl\.h \
  "$lib/libloom\.so" "$lib/cmake/Loom/LoomConfig\.cmake" "$lib/cmake/Loom/LoomConfigVersion\.cmake" \
  "$lib/cmake/Loom/LoomTargets\.cmake" "$lib/pkgconfig/loom\.pc" "$lib/pkgconfig/nccl\.pc"
expect_in "$tools_deb" /usr/bin/loomrun /usr/bin/all_reduce_perf /usr/bin/loom_tune_fit \
  /usr/share/man/man1/loomrun\.1 /usr/share/man/man1/all_reduce_perf\.1
# Headers and links only in -dev, programs only in tools.
contents "$runtime_deb" | grep -Eq '^/usr/(include|bin)/.' && fail "$runtime holds headers or programs"
contents "$tools_deb" | grep -Eq '^/usr/(include|lib)/.' && fail "loom-tools holds headers or libraries"
duplicates=$(for d in "$runtime_deb" "$dev_deb" "$tools_deb"; do contents "$d" | grep -v '/$'; done | sort | uniq -d)
[[ -z $duplicates ]] || fail "files in more than one package: $duplicates"

depends() { dpkg-deb -f "$1" Depends; }
for d in "$dev_deb" "$tools_deb"; do
  [[ $(depends "$d") == *"$runtime (= $version)"* ]] || fail "$(basename "$d") Depends '$(depends "$d")' lacks $runtime (= $version)"
done
for d in "$runtime_deb" "$tools_deb"; do
  [[ $(depends "$d") == *libc6* ]] || fail "$(basename "$d") Depends '$(depends "$d")': dpkg-shlibdeps did not run"
done
dpkg-deb -I "$runtime_deb" shlibs >/dev/null 2>&1 || fail "$runtime has no shlibs file"

for d in "$runtime_deb" "$dev_deb" "$tools_deb"; do
  echo "== $(basename "$d"): Depends: $(depends "$d")"
  contents "$d" | grep -v '/$'
  dpkg -x "$d" "$work/root"
done

root=$work/root
out=$(env -u LD_LIBRARY_PATH "$root/usr/bin/all_reduce_perf" --version) || fail "unpacked all_reduce_perf --version exited $?"
[[ $out == "all_reduce_perf (Loom) $version" ]] || fail "unpacked all_reduce_perf --version printed '$out'"
pc=$(find "$root/usr/lib" -name loom.pc -print -quit)
[[ -n $pc ]] || fail "no loom.pc under $root/usr/lib"
pcdir=$(dirname "$pc")
mkdir -p "$work/consumer"
PKG_CONFIG_PATH=$pcdir make -s -f "$src/tests/install/pkgconfig_consumer/Makefile" OUT="$work/consumer" ||
  fail "pkg-config build against the unpacked packages"
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir loom)
nccl_libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir nccl)
for exe in loom_consumer nccl_consumer; do
  LD_LIBRARY_PATH="$libdir:$nccl_libdir" "$work/consumer/$exe" || fail "$exe against the unpacked packages exited $?"
done
echo "package_test: OK ($work/packages)"
