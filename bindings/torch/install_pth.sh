#!/usr/bin/env bash
# Makes `/usr/bin/python3 -c "import loom_torch"` work from a build tree:
# writes loom_torch.pth (one line, BUILD_DIR/python) into the site-packages of
# /usr/bin/python3 that is meant for local packages (/usr/local/lib/python3.X/
# dist-packages on Debian). The package stays in the build tree, so rebuilding
# updates it; the .pth names the last build tree installed. Idempotent.
set -euo pipefail
build=$(cd "${1:?usage: install_pth.sh BUILD_DIR}" && pwd)
if [ ! -d "$build/python/loom_torch" ]; then
  echo "[loom_torch] not built in $build (needs libtorch-dev and pybind11-dev): nothing to install"
  exit 0
fi
site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO mkdir -p "$site"
echo "$build/python" | $SUDO tee "$site/loom_torch.pth" >/dev/null
echo "[loom_torch] $site/loom_torch.pth -> $build/python"
