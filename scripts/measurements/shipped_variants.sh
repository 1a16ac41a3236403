#!/usr/bin/env bash
# Shipped queries under changed configurations (docs/measurements.md, issue
# 46): every queries/*.toml built, without editing the file, under each of
# `--set workload.batch=2`, `--set workload.layers=12`, `--set
# machine.tiles=736` and `--set planning.matrix_inputs=fp16`, cold
# (`--no-cache -q`, outputs in a scratch folder). Prints one table row per
# build: the query, the change, the exit code, the wall time and the
# estimate, or the first line of the error (a fit error must be about
# memory, never about a stale override).
#
# Usage (from anywhere; BINARY defaults to target/release/superstep):
#   bash scripts/measurements/shipped_variants.sh [BINARY]
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
binary="${1:-$root/target/release/superstep}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$root"
echo "commit $(git rev-parse --short HEAD), binary $binary"
echo "machine $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo
printf '| query | --set | exit | wall s | estimate cycles, or the error |\n'
printf '|---|---|---|---|---|\n'
for query in queries/siglip-so400m.toml queries/pe-core-l14.toml queries/vit-b16.toml queries/vit-tiny.toml; do
  for change in workload.batch=2 workload.layers=12 machine.tiles=736 planning.matrix_inputs=fp16; do
    out="$scratch/out.txt"
    err="$scratch/err.txt"
    start=$(date +%s.%N)
    "$binary" build "$query" --no-cache -q --suggestions 0 \
      --set "outputs.directory=$scratch/artifacts" --set "$change" > "$out" 2> "$err"
    code=$?
    end=$(date +%s.%N)
    wall=$(printf '%.1f' "$(echo "$end - $start" | bc)")
    if [ "$code" -eq 0 ]; then
      result=$(grep -m1 '^estimate:' "$out" | sed -E 's/^estimate: ([0-9,]+) cycles.*/\1/')
      layouts=$(grep -m1 '^layouts:' "$out" | sed -E 's/^layouts: ([a-z]+).*/\1/')
      result="$result ($layouts layouts)"
    else
      # The error's first line, without the rendering's frame.
      result=$(grep -m1 -E 'error|x ' "$err" | sed -E 's/^[[:space:]]*(x|error:)[[:space:]]*//' | cut -c1-160)
    fi
    printf '| %s | %s | %s | %s | %s |\n' "$(basename "$query" .toml)" "$change" "$code" "$wall" "$result"
    rm -rf "$scratch/artifacts"
  done
done
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
