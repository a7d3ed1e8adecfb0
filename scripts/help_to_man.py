#!/usr/bin/env python3
"""Writes a section-1 man page from a program's own --help and --version.

The page is the help text verbatim (so it cannot drift from the program),
under the usual NAME / SYNOPSIS / DESCRIPTION / SEE ALSO headings:

  help_to_man.py --program PATH --name NAME --summary TEXT --output FILE

The program runs with argv[0] = NAME, so usage lines name the installed
program rather than the build tree's path.
"""

import argparse
import re
import subprocess
import sys


def run(program, name, flag):
    result = subprocess.run([name, flag], executable=program, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        sys.exit(f"help_to_man.py: '{name} {flag}' exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def roff_escape(line):
    line = line.replace("\\", "\\e")
    # Options are typed as written: a minus sign, not a hyphen.
    line = line.replace("-", "\\-")
    # A line that starts with . or ' would be read as a request.
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--program", required=True, help="the program to run")
    parser.add_argument("--name", required=True, help="its installed name")
    parser.add_argument("--summary", required=True, help="the NAME line's description")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    help_text = run(args.program, args.name, "--help")
    version_line = run(args.program, args.name, "--version").strip()
    match = re.fullmatch(re.escape(args.name) + r" \(Loom\) (\d+\.\d+\.\d+)", version_line)
    if not match:
        sys.exit(f"help_to_man.py: '{args.name} --version' printed '{version_line}', "
                 f"expected '{args.name} (Loom) X.Y.Z'")
    version = match.group(1)

    lines = help_text.rstrip("\n").split("\n")
    synopsis = []
    if lines and lines[0].lower().startswith("usage:"):
        synopsis.append(lines.pop(0)[len("usage:"):].strip())
    while lines and not lines[0].strip():
        lines.pop(0)

    title = args.name.upper().replace("\\", "")
    out = [f'.TH "{title}" "1" "" "Loom {version}" "Loom tools"', ".SH NAME",
           f"{roff_escape(args.name)} \\- {roff_escape(args.summary)}"]
    if synopsis:
        out += [".SH SYNOPSIS", ".nf"] + [roff_escape(s) for s in synopsis] + [".fi"]
    out += [".SH DESCRIPTION", ".nf"]
    out += [roff_escape(line) for line in lines]
    out += [".fi", ".SH VERSION", f"{roff_escape(version_line)} (printed by \\-\\-version).", ".SH SEE ALSO"]
    see_also = [p for p in ("loomrun", "all_reduce_perf") if p != args.name]
    out.append(", ".join(f"\\fB{p}\\fR(1)" for p in see_also) + ",")
    out.append("and the documents in /usr/share/doc/loom (or <prefix>/share/doc/loom): "
               "user-guide.md, tools.md, environment.md, install.md.")
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
