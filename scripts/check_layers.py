#!/usr/bin/env python3
"""Checks Loom's layering: which folder (layer) may include which.

Every tracked C/C++/CUDA source (git ls-files) is scanned; a file belongs to
the layer whose path prefix is the longest that matches. Fails (exit 1, one
line per finding) on
  - an include of a layer the table does not allow (file:line, the include,
    from-layer -> to-layer), or of a header outside the included layer's
    interface when that layer declares one;
  - a quoted include that does not resolve to a file from the repository
    root, or that only resolves next to the including file (not spelled
    from the root); the public headers (PUBLIC_INCLUDES) are the exception;
  - a cycle between layers (taken over the includes actually present);
  - with --cmake-deps FILE (written by CMake, see the top-level
    CMakeLists.txt): a layer that includes another whose CMake target its
    own target does not reach through its declared link dependencies.

--print-table prints the table in Markdown for the docs.
--root DIR checks another tree (scripts/check_layers_selftest.py runs it on
small trees with deliberate violations).
"""

import argparse
import os
import re
import subprocess
import sys

# (layer, path prefixes, layers it may include, CMake targets). Lowest first.
# A layer may always include itself and the public headers' layers it lists.
# "tests" is special: it may include anything.
LAYERS = [
    ("public", ["include/loom/"], [], []),
    ("nccl-public", ["shim/nccl/include/"], [], []),
    ("common", ["common/"], [], ["loom_common"]),
    ("kernels", ["kernels/"], ["common"], ["loom_kernels"]),
    ("kernels/cuda", ["kernels/cuda/"], ["common", "kernels"], ["loom_kernels_cuda_host", "loom_kernels_cuda"]),
    ("bootstrap", ["bootstrap/"], ["common"], ["loom_bootstrap"]),
    ("transports", ["transports/"], ["common"], ["loom_transport_api"]),
    ("transports/shm", ["transports/shm/"], ["common", "bootstrap", "transports"], ["loom_transport_shm"]),
    ("transports/tcp", ["transports/tcp/"], ["common", "bootstrap", "transports"], ["loom_transport_tcp"]),
    ("transports/ucx", ["transports/ucx/"], ["common", "bootstrap", "transports"], ["loom_transport_ucx"]),
    ("transports/verbs", ["transports/verbs/"], ["common", "bootstrap", "transports"], ["loom_transport_verbs"]),
    ("algorithms/patterns", ["algorithms/patterns/"], ["common"], ["loom_algorithms"]),
    ("algorithms", ["algorithms/"], ["common", "kernels", "transports", "algorithms/patterns"], ["loom_algorithms"]),
    ("src/topology", ["src/topology/"], ["common"], ["loom_topology"]),
    ("src/tuner", ["src/tuner/"], ["common", "transports", "algorithms", "algorithms/patterns"], ["loom_tuner"]),
    ("src/diagnostics", ["src/diagnostics/"], ["common", "bootstrap", "algorithms"], ["loom_diagnostics"]),
    ("src/device", ["src/device/"], ["common", "kernels/cuda", "bootstrap", "transports", "algorithms"],
     ["loom_cuda"]),
    ("src/comm", ["src/comm/"],
     ["public", "common", "kernels", "bootstrap", "transports", "transports/shm", "transports/tcp", "transports/ucx",
      "transports/verbs", "algorithms", "algorithms/patterns", "src/topology", "src/tuner", "src/diagnostics",
      "src/device"], ["loom_comm", "loom_transport_policy"]),
    ("src/api", ["src/api/"],
     ["public", "common", "bootstrap", "algorithms", "src/tuner", "src/diagnostics", "src/device", "src/comm"],
     ["loom"]),
    ("tools/loomrun", ["tools/loomrun/"], ["common", "src/topology"], ["loomrun"]),
    ("tools/tune_fit", ["tools/tune_fit/"], ["common", "algorithms", "src/tuner"], ["loom_tune_fit"]),
    ("shim/nccl", ["shim/nccl/"], ["public", "nccl-public", "common", "kernels"], ["loom_nccl"]),
    ("bindings/torch", ["bindings/torch/"], ["public"], ["loom_torch_ext"]),
    ("ddp", ["ddp/"], ["public"], ["loom_ddp"]),
    ("examples", ["examples/"], ["public", "ddp"], ["train_demo"]),
    ("perf", ["perf/"], ["public", "ddp", "kernels"],
     ["loom_perf_base", "loom_perf_common", "ddp_bench", "reduce_kernels_bench"]),
    ("tests", ["tests/"], None, []),
]

# Layers whose headers other layers may include only in part: the layer's
# interface. A layer listed here keeps the rest to itself (and to the layers
# named in INTERFACE_FRIENDS).
INTERFACES = {
    # Kernels' public headers; reduce_ops.h and the ISA tables are internals.
    "kernels": ["kernels/reduce.h", "kernels/stream_copy.h", "kernels/float16.h"],
    # A backend is reached only through its transport class, by the registry
    # (and, for verbs, its RDMA on registered memory, which GDR uses).
    "transports/shm": ["transports/shm/shm_transport.h"],
    "transports/tcp": ["transports/tcp/tcp_transport.h"],
    "transports/ucx": ["transports/ucx/ucx_transport.h"],
    "transports/verbs": ["transports/verbs/verbs_transport.h", "transports/verbs/verbs_rdma_memory.h"],
}
# Who may see past a layer's interface: the CUDA kernels share the CPU
# kernels' element-wise arithmetic (reduce_ops.h) so both round identically.
INTERFACE_FRIENDS = {"kernels": ["kernels/cuda"]}

# Quoted includes that are not files from the root: the public headers, in
# their installed spelling (their folders are on the include path).
PUBLIC_INCLUDES = {"loom/loom.h": "public", "loom/loom.hpp": "public", "nccl.h": "nccl-public"}

# Known exceptions: (including file, included file) -> why it stays. None
# today: fix a violation rather than list it; an entry that no longer matches
# an include fails the check, so the list cannot go stale.
KNOWN_EXCEPTIONS = {
}

SOURCE_SUFFIXES = (".h", ".hpp", ".hh", ".inl", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(path):
    best = None
    for name, prefixes, _, _ in LAYERS:
        for prefix in prefixes:
            if (path == prefix or path.startswith(prefix)) and (best is None or len(prefix) > best[1]):
                best = (name, len(prefix))
    return best[0] if best else None


def allowed_of(name):
    for layer, _, allowed, _ in LAYERS:
        if layer == name:
            return allowed
    raise KeyError(name)


def targets_of(name):
    for layer, _, _, targets in LAYERS:
        if layer == name:
            return targets
    return []


def tracked_sources(root):
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (subprocess.CalledProcessError, FileNotFoundError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "build"]
            for f in filenames:
                files.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(f for f in files if f.endswith(SOURCE_SUFFIXES) and os.path.isfile(os.path.join(root, f)))


def scan(root, files):
    """Yields (file, line number, include text, quoted?, resolved path or None, problem or None)."""
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                quoted, text = m.group(1) == '"', m.group(2)
                if text in PUBLIC_INCLUDES:
                    yield path, number, text, quoted, text, None
                    continue
                from_root = os.path.normpath(text)
                if not from_root.startswith("..") and os.path.isfile(os.path.join(root, from_root)) \
                        and layer_of(from_root) is not None:
                    problem = None if quoted and from_root == text else "not spelled from the repository root"
                    yield path, number, text, quoted, from_root, problem
                    continue
                if not quoted:
                    continue  # a system or third-party header
                beside = os.path.normpath(os.path.join(os.path.dirname(path), text))
                if os.path.isfile(os.path.join(root, beside)):
                    yield path, number, text, quoted, beside, "not spelled from the repository root (resolves only next to the file as " + beside + ")"
                else:
                    yield path, number, text, quoted, None, "does not resolve to a file from the repository root"


def target_of_include(resolved):
    if resolved in PUBLIC_INCLUDES:
        return PUBLIC_INCLUDES[resolved]
    return layer_of(resolved)


def find_cycles(edges):
    """Strongly connected components with more than one layer (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def read_cmake_deps(path):
    """target -> direct dependencies, from the file CMake generates (one
    `target: dep;dep;...` line per target)."""
    deps = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if ":" not in line:
                continue
            target, _, rest = line.strip().partition(":")
            names = []
            for item in rest.strip().split(";"):
                item = re.sub(r"^\$<LINK_ONLY:(.*)>$", r"\1", item.strip())
                item = re.sub(r"::@.*$", "", item)
                if item:
                    names.append(item)
            deps[target.strip()] = names
    return deps


def reachable(deps, start):
    seen, pending = set(), [start]
    while pending:
        t = pending.pop()
        for d in deps.get(t, ()):
            if d not in seen:
                seen.add(d)
                pending.append(d)
    return seen


def check(root, cmake_deps=None):
    names = [layer for layer, _, _, _ in LAYERS]
    for layer, _, allowed, _ in LAYERS:
        for a in allowed or []:
            if a not in names:
                raise SystemExit("check_layers.py: layer %s lists unknown layer %s" % (layer, a))
    findings, used_exceptions = [], set()
    edges = {}  # layer -> layers it includes (excluding tests)
    for path, number, text, quoted, resolved, problem in scan(root, tracked_sources(root)):
        src = layer_of(path)
        where = "%s:%d: #include %s" % (path, number, '"%s"' % text if quoted else "<%s>" % text)
        if problem:
            findings.append("%s: %s" % (where, problem))
            continue
        dst = target_of_include(resolved)
        if src is None or dst is None or src == dst:
            continue
        if src != "tests":
            edges.setdefault(src, set()).add(dst)
        allowed = allowed_of(src)
        why = None
        if allowed is None:
            pass
        elif dst not in allowed:
            why = "%s -> %s is not in the layer table" % (src, dst)
        elif dst in INTERFACES and resolved not in INTERFACES[dst] and src not in INTERFACE_FRIENDS.get(dst, []):
            why = "%s -> %s: %s is not in %s's interface (%s)" % (src, dst, resolved, dst, ", ".join(INTERFACES[dst]))
        if why:
            key = (path, resolved)
            if key in KNOWN_EXCEPTIONS:
                used_exceptions.add(key)
                continue
            findings.append("%s: %s" % (where, why))
    for cycle in find_cycles(edges):
        findings.append("layer cycle: %s (each includes another of them)" % " <-> ".join(cycle))
    for key in sorted(set(KNOWN_EXCEPTIONS) - used_exceptions):
        findings.append("%s: known exception for %s is no longer needed: remove it from KNOWN_EXCEPTIONS" % key)
    if cmake_deps:
        # Per layer, not per file: a layer with several targets passes when
        # one of them reaches a target of every layer it includes.
        deps = read_cmake_deps(cmake_deps)
        for src in sorted(edges):
            built = [t for t in targets_of(src) if t in deps]  # the others are not built in this configuration
            if not built:
                continue
            reach = set(built)
            for target in built:
                reach |= reachable(deps, target)
            for dst in sorted(edges[src]):
                wanted = [t for t in targets_of(dst) if t in deps]
                if wanted and not reach.intersection(wanted):
                    findings.append("%s (%s) includes %s but does not depend on %s in CMake" %
                                    (" / ".join(built), src, dst, " or ".join(wanted)))
    return findings


def print_table():
    print("| Layer | Folder | May include | CMake target |")
    print("|---|---|---|---|")
    for layer, prefixes, allowed, targets in LAYERS:
        if allowed is None:
            may = "anything"
        else:
            parts = []
            for a in allowed:
                parts.append("%s (%s)" % (a, ", ".join(INTERFACES[a])) if a in INTERFACES
                             and layer not in INTERFACE_FRIENDS.get(a, []) else a)
            may = ", ".join(parts) if parts else "-"
        folders = ", ".join("`%s`" % p for p in prefixes)
        print("| %s | %s | %s | %s |" % (layer, folders, may, ", ".join("`%s`" % t for t in targets) or "-"))
    print()
    print("A file belongs to the layer of the longest folder that holds it (`transports/` is the contract:")
    print("transport.h, rdma_memory.h; `transports/shm/` a backend). Where a layer names headers in")
    print("parentheses, only those are its interface to the layers above.")
    if KNOWN_EXCEPTIONS:
        print()
        print("Known exceptions:")
        print()
        for (src, dst), why in sorted(KNOWN_EXCEPTIONS.items()):
            print("- `%s` includes `%s`: %s" % (src, dst, why))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--print-table", action="store_true", help="print the layer table in Markdown and exit")
    parser.add_argument("--print-targets", action="store_true", help="print the CMake targets of the table, ';'-separated")
    parser.add_argument("--cmake-deps", help="file with one `target: deps` line per target (CMake writes it)")
    args = parser.parse_args()
    if args.print_table:
        print_table()
        return 0
    if args.print_targets:
        print(";".join(dict.fromkeys(t for _, _, _, targets in LAYERS for t in targets)))
        return 0
    if args.cmake_deps and not os.path.isfile(args.cmake_deps):
        print("check_layers.py: --cmake-deps %s: no such file" % args.cmake_deps, file=sys.stderr)
        return 2
    findings = check(args.root, args.cmake_deps)
    for f in findings:
        print(f)
    if findings:
        print("check_layers.py: %d layering violation(s)" % len(findings), file=sys.stderr)
        return 1
    print("check_layers.py: layering OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
