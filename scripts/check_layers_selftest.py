#!/usr/bin/env python3
"""Self-test of scripts/check_layers.py: runs it on small temporary trees,
one deliberate violation each, and expects it to fail naming that violation
(and to pass on the clean tree), so the layering test can be seen failing."""

import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

CLEAN = {
    "common/status.h": "#pragma once\n#include <cstdint>\n",
    "kernels/reduce.h": '#pragma once\n#include "common/status.h"\n',
    "kernels/reduce_ops.h": '#pragma once\n#include "kernels/float16.h"\n',
    "kernels/float16.h": "#pragma once\n",
    "kernels/cuda/reduce_copy_core.h": '#pragma once\n#include "kernels/reduce_ops.h"\n',
    "transports/transport.h": '#pragma once\n#include "common/status.h"\n',
    "algorithms/patterns/ring_order.h": "#pragma once\n#include <vector>\n",
    "algorithms/algorithm.h": '#pragma once\n#include "algorithms/patterns/ring_order.h"\n#include "transports/transport.h"\n',
    "src/tuner/tuner.h": '#pragma once\n#include "algorithms/algorithm.h"\n',
    "shim/nccl/include/nccl.h": "#pragma once\n",
    "include/loom/loom.h": "#pragma once\n",
    "shim/nccl/scale.cc": '#include <loom/loom.h>\n#include "nccl.h"\n#include "kernels/float16.h"\n',
    "tests/unit/anything_test.cc": '#include "kernels/reduce_ops.h"\n#include "src/tuner/tuner.h"\n',
}
DEPS_OK = "loom_tuner: loom_algorithms;$<LINK_ONLY:loom_warnings>\nloom_algorithms: loom_transport_api;loom_common\n"
DEPS_MISSING = "loom_tuner: loom_common;$<LINK_ONLY:loom_warnings>\nloom_algorithms: loom_transport_api;loom_common\n"

# (name, files changed from CLEAN, deps file or None, text the output must contain; None: must pass)
CASES = [
    ("clean tree", {}, None, None),
    ("clean tree, CMake dependencies declared", {}, DEPS_OK, None),
    ("upward include", {"common/status.h": '#pragma once\n#include "kernels/reduce.h"\n'}, None,
     'common/status.h:2: #include "kernels/reduce.h": common -> kernels is not in the layer table'),
    ("unresolved include", {"kernels/reduce.h": '#pragma once\n#include "common/missing.h"\n'}, None,
     "kernels/reduce.h:2: #include \"common/missing.h\": does not resolve to a file from the repository root"),
    ("include not spelled from the root", {"kernels/reduce.h": '#pragma once\n#include "float16.h"\n'}, None,
     "not spelled from the repository root"),
    ("project header in angle brackets", {"kernels/reduce.h": "#pragma once\n#include <common/status.h>\n"}, None,
     "kernels/reduce.h:2: #include <common/status.h>: not spelled from the repository root"),
    ("header outside the layer's interface", {"shim/nccl/scale.cc": '#include "kernels/reduce_ops.h"\n'}, None,
     "shim/nccl -> kernels: kernels/reduce_ops.h is not in kernels's interface"),
    ("contract layer reaching a backend", {"transports/verbs/verbs_api.h": "#pragma once\n",
                                           "algorithms/algorithm.h": '#include "transports/verbs/verbs_api.h"\n'},
     None, "algorithms -> transports/verbs is not in the layer table"),
    ("layer cycle", {"algorithms/patterns/ring_order.h": '#pragma once\n#include "algorithms/algorithm.h"\n'}, None,
     "layer cycle: algorithms <-> algorithms/patterns"),
    ("missing CMake dependency", {}, DEPS_MISSING,
     "loom_tuner (src/tuner) includes algorithms but does not depend on loom_algorithms in CMake"),
]


def run_case(files, deps):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        cmd = [sys.executable, CHECKER, "--root", root]
        if deps is not None:
            with open(os.path.join(root, "deps.txt"), "w") as f:
                f.write(deps)
            cmd += ["--cmake-deps", os.path.join(root, "deps.txt")]
        done = subprocess.run(cmd, capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr


def main():
    failures = 0
    for name, changes, deps, expected in CASES:
        files = dict(CLEAN)
        files.update(changes)
        rc, out = run_case(files, deps)
        if expected is None:
            ok = rc == 0
            want = "exit 0"
        else:
            ok = rc == 1 and expected in out
            want = "exit 1 and a line containing: " + expected
        print("%s: %s" % ("ok  " if ok else "FAIL", name))
        if not ok:
            failures += 1
            print("  wanted %s\n  got exit %d, output:\n%s" % (want, rc, "".join("    " + l + "\n" for l in out.splitlines())))
    print("%d of %d cases failed" % (failures, len(CASES)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
