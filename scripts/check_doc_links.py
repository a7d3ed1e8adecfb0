#!/usr/bin/env python3
"""Checks that every relative link in the project's Markdown resolves.

    scripts/check_doc_links.py [FILE.md ...]

Without arguments it checks README.md, docs/*.md, perf/README.md and
bindings/torch/README.md under the repository root. For each inline link or
image `[text](target)` whose target is not a URL (http:, https:, mailto:),
the target path, taken relative to the Markdown file, must name an existing
file or folder inside the repository; a `#fragment` must match a heading of
the target Markdown file (GitHub's anchor rules), or of the file itself when
the link is only `#fragment`. Links inside code spans and fenced code blocks
are not links and are skipped.

Prints one line per broken link (file:line: target: why) and exits 1 if
there is any, 0 otherwise; 2 for a named file that does not exist.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ["README.md", "perf/README.md", "bindings/torch/README.md"]

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def default_files():
    files = [f for f in DEFAULT_FILES if os.path.exists(os.path.join(ROOT, f))]
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    return files


def prose_lines(text, strip_code_spans=True):
    """(line number, line) for lines outside fenced code, code spans removed
    unless strip_code_spans is false."""
    in_fence = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            if in_fence is None:
                in_fence = fence.group(1)
            elif fence.group(1) == in_fence:
                in_fence = None
            continue
        if in_fence is None:
            yield number, CODE_SPAN.sub("", line) if strip_code_spans else line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read(), strip_code_spans=False):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check_file(rel):
    path = os.path.join(ROOT, rel)
    problems = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if EXTERNAL.match(target):
                continue
            file_part, _, fragment = target.partition("#")
            resolved = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            where = f"{rel}:{number}: {target}"
            if not (resolved + os.sep).startswith(ROOT + os.sep) and resolved != ROOT:
                problems.append(f"{where}: points outside the repository")
                continue
            if not os.path.exists(resolved):
                problems.append(f"{where}: {os.path.relpath(resolved, ROOT)} does not exist")
                continue
            if fragment:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                elif fragment not in anchors(resolved):
                    problems.append(f"{where}: no heading with anchor '#{fragment}' in "
                                    f"{os.path.relpath(resolved, ROOT)}")
    return problems


def main(argv):
    files = argv[1:] or default_files()
    problems = []
    for rel in files:
        rel = os.path.relpath(os.path.abspath(rel), ROOT) if os.path.isabs(rel) or os.path.exists(rel) else rel
        if not os.path.isfile(os.path.join(ROOT, rel)):
            print(f"check_doc_links: {rel}: no such file", file=sys.stderr)
            return 2
        problems += check_file(rel)
    for p in problems:
        print(p)
    print(f"check_doc_links: {len(files)} file(s), {len(problems)} broken link(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
