#!/usr/bin/env python3
"""Runs a perf tool and compares its output with a stored nccl-tests run.

Usage: check_nccl_format.py SAMPLE [--json] -- TOOL [ARGS...]

The comparison is line by line, with the numbers masked, so that the fixed
text and the column layout must be nccl-tests' own:
  - comment lines: identical once every number reads N (and, on the memory
    line, every unit U);
  - table rows: the same tokens (numbers as N) ending at the same columns,
    which is what nccl-tests' right-aligned widths give;
  - device lines: nccl-tests' layout (widths of rank, group, pid, host,
    device; "[bus] name"), host names and pids aside.
Loom's own notes may appear only as "# " lines right after the device lines.
With --json the tool also runs with -J into a scratch folder, twice: the
first file must have nccl-tests' JSON schema (keys, nesting, types) and
hold the printed rows (and no secret from the environment), and the second
run must pick the name FILE.0.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
DEVICE = re.compile(r"^#  Rank [ \d]\d+ Group [ \d]\d+ Pid [ \d]{5}\d+ on (?=.{10}).*\S device [ \d]\d+ \[[^\]]*\] \S.*$")


def fail(message):
    print("check_nccl_format.py: " + message, file=sys.stderr)
    sys.exit(1)


def mask_comment(line):
    if line.startswith("# GPU memory usage"):
        line = re.sub(r"\d+(?:\.\d+)? (?:B|KB|MB|GB)\b", "N U", line)
    return NUMBER.sub("N", line)


def row_shape(line):
    shape = []
    for m in re.finditer(r"\S+", line):
        token = "N" if NUMBER.fullmatch(m.group()) else m.group()
        shape.append((token, m.end()))
    return shape


def drop_loom_notes(lines):
    """Removes the "# " lines that follow the last device line."""
    out, after_devices = [], False
    for line in lines:
        if line.startswith("#  Rank "):
            after_devices = True
        elif after_devices and line.startswith("# "):
            continue
        else:
            after_devices = False
        out.append(line)
    return out


def compare(sample, actual):
    if actual and actual[0].startswith("# Writing JSON output to "):
        actual = actual[1:]
    actual = drop_loom_notes(actual)
    if len(sample) != len(actual):
        fail(f"{len(actual)} lines (after Loom's notes), the nccl-tests sample has {len(sample)}")
    for n, (want, got) in enumerate(zip(sample, actual), 1):
        if want.startswith("#  Rank "):
            ok = DEVICE.match(got) is not None
        elif want.startswith("#") or not want:
            ok = mask_comment(want) == mask_comment(got)
        else:
            ok = row_shape(want) == row_shape(got)
        if not ok:
            fail(f"line {n} differs in layout:\n  nccl-tests: {want!r}\n  tool:       {got!r}")


def rows_of(lines):
    return [line.split() for line in lines if line and not line.startswith("#")]


def check_json(path, printed_rows):
    with open(path) as f:
        doc = json.load(f)
    top = ["version", "start_time", "args", "env", "nccl_version", "config", "results", "out_of_bounds",
           "average_bus_bandwidth", "errors", "end_time"]
    if list(doc) != top:
        fail(f"JSON top-level keys {list(doc)}, nccl-tests writes {top}")
    if doc["version"] != 3 or not isinstance(doc["nccl_version"], int):
        fail("JSON version is not 3 or nccl_version is not a number")
    config = ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor", "warmup_iters", "iterations",
              "aggregated_iterations", "validation", "graph", "blocking_collectives", "per_iter_timing",
              "per_iter_skip", "parallel_init", "devices"]
    if list(doc["config"]) != config:
        fail(f"JSON config keys {list(doc['config'])}, expected {config}")
    device = ["rank", "group", "pid", "hostname", "device", "device_hex", "device_info"]
    for d in doc["config"]["devices"]:
        if list(d) != device:
            fail(f"JSON device keys {list(d)}, expected {device}")
    result = ["size", "count", "type", "redop", "root", "out_of_place", "in_place", "actual_iterations",
              "experiment_name"]
    placement = ["time", "alg_bw", "bus_bw", "nwrong"]
    if len(doc["results"]) != len(printed_rows):
        fail(f"JSON has {len(doc['results'])} results, the table {len(printed_rows)} rows")
    for r, row in zip(doc["results"], printed_rows):
        if list(r) != result or list(r["out_of_place"]) != placement or list(r["in_place"]) != placement:
            fail(f"JSON result keys differ: {r}")
        if not isinstance(r["root"], str) or r["root"].strip() != row[4]:
            fail(f"JSON root {r['root']!r} is not the printed column as a string")
        if [str(r["size"]), str(r["count"]), r["type"], r["redop"]] != row[:4]:
            fail(f"JSON result {r} is not the printed row {row}")
        for value, printed in ((r["out_of_place"]["time"], row[5]), (r["in_place"]["time"], row[9])):
            if abs(value - float(printed)) > max(0.01, 0.01 * float(printed)):
                fail(f"JSON time {value} is not the printed {printed}")
    for entry in doc["env"]:
        name, _, value = entry.partition("=")
        if "SECRET" in name.upper() and value != "<redacted>":
            fail(f"JSON env records the secret {name}")
    if doc["out_of_bounds"] != {"count": 0, "okay": "true"}:
        fail(f"JSON out_of_bounds {doc['out_of_bounds']}")
    if set(doc["average_bus_bandwidth"]) != {"bandwidth", "okay"} or doc["errors"] != []:
        fail("JSON average_bus_bandwidth or errors differ from nccl-tests'")


def main():
    args = sys.argv[1:]
    if "--" not in args:
        fail("usage: check_nccl_format.py SAMPLE [--json] -- TOOL [ARGS...]")
    split = args.index("--")
    options, command = args[:split], args[split + 1:]
    with open(options[0]) as f:
        sample = f.read().split("\n")
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "run.json")
        if "--json" in options:
            command = command + ["-J", path]
        run = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=120)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            fail(f"{command[0]} exited {run.returncode}")
        actual = run.stdout.split("\n")
        compare(sample, actual)
        if "--json" in options:
            if actual[0] != "# Writing JSON output to " + path:
                fail(f"first line {actual[0]!r} does not name {path}")
            check_json(path, rows_of(actual))
            again = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=120)
            if again.returncode != 0 or not again.stdout.startswith(f"# Writing JSON output to {path}.0\n"):
                fail("a second run did not write FILE.0 next to the existing FILE")
            check_json(path + ".0", rows_of(again.stdout.split("\n")))
    print("check_nccl_format.py: the output has nccl-tests' format")


main()
