#!/usr/bin/env bash
# PROGRAM --version must exit 0 and print exactly "NAME (Loom) VERSION".
# usage: check_version.sh PROGRAM NAME VERSION
set -uo pipefail
out=$("$1" --version)
status=$?
((status == 0)) || { echo "check_version: '$2 --version' exited $status" >&2; exit 1; }
[[ $out == "$2 (Loom) $3" ]] || { echo "check_version: '$2 --version' printed '$out', expected '$2 (Loom) $3'" >&2; exit 1; }
echo "$out"
