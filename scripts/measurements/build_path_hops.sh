#!/usr/bin/env bash
# The build path's hops (docs/measurements.md, "The build path"): runs a
# tiny build under callgrind and counts the user-layer files it executes
# and the calls between them. Needs valgrind (apt-get install valgrind).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
binary="${1:-$root/target/release/superstep}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp -r "$root/queries" "$scratch/"
(cd "$scratch" && valgrind --tool=callgrind --callgrind-out-file="$scratch/callgrind.out" \
    "$binary" build queries/vit-tiny.toml --no-cache -q --set outputs.directory="$scratch/out" \
    > /dev/null 2> "$scratch/valgrind.log")
python3 "$root/scripts/measurements/build_path_hops.py" "$scratch/callgrind.out"
