#!/usr/bin/env bash
# CI's wall time (docs/measurements.md, "CI"): clones the repository's HEAD
# into a scratch folder, runs `.ci/run` there (the README's test command)
# with nothing built, and prints the wall time, the lint and test-build
# times cargo reported and the test counts. Run it with nothing else busy.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git clone -q "$root" "$scratch/clone"
cd "$scratch/clone"
echo "commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1 /proc/loadavg) at the start"
start=$(date +%s.%N)
if ! bash .ci/run > "$scratch/out.txt" 2> "$scratch/err.txt"; then
  tail -n 40 "$scratch/err.txt" "$scratch/out.txt"
  echo ".ci/run failed" >&2
  exit 1
fi
end=$(date +%s.%N)
grep -E "Finished .(dev|test). profile" "$scratch/err.txt" | sed 's/^ */cargo: /'
grep -E "^test result" "$scratch/out.txt" | grep -v " 0 passed; 0 failed; 0 ignored" | sed 's/^/tests: /'
printf 'wall: %.1f s\n' "$(echo "$end - $start" | bc)"
