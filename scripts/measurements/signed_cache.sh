#!/usr/bin/env bash
# A signed team cache (docs/measurements.md, "A signed team cache (issue
# 45)"): whole-process wall times of the default SigLIP query, a BEFORE
# and an AFTER compiler alternating run by run, against a real nginx with
# WebDAV PUT on a loopback port (started here, stopped at the end).
#
#   scripts/measurements/signed_cache.sh BEFORE_BINARY AFTER_BINARY [RUNS]
#
# Cases, each RUNS times (default 5) per compiler, median printed:
#   warm-local   `build` with a warm local cache in the outputs folder
#   remote-build `build`, a fresh local cache over a warm remote (AFTER:
#                filled by a writer with a signing key, read with
#                --cache-trusted-key; BEFORE: its own warm remote)
#   remote-sweep `sweep`, the same
#   untrusted    AFTER only: `build`, a fresh local cache over the signed
#                remote with no trusted key (today's path)
#   remote-search AFTER only: `search` with a fresh local cache over the
#                signed remote, trusted (the writer ran the same search
#                before its build and sweep, so those compile the searched
#                plan; a small search, SEARCH below, about a minute cold;
#                BEFORE never fetches a search, so it would search again)
# Run it with nothing else busy; it prints the load average as it goes.
set -euo pipefail
before="$(realpath "$1")"
after="$(realpath "$2")"
runs="${3:-5}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
scratch="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
mkdir -p "$scratch/nginx/store" "$scratch/nginx/bodies"
cat > "$scratch/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $scratch/nginx/nginx.pid;
error_log $scratch/nginx/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $scratch/nginx/bodies;
  server {
    listen 127.0.0.1:$port;
    root $scratch/nginx/store;
    client_max_body_size 2g;
    location / { dav_methods PUT; create_full_put_path on; dav_access user:rw group:rw all:r; }
  }
}
EOF
chmod 0777 "$scratch/nginx/store" "$scratch/nginx/bodies"
# nginx's workers run as another user: they must reach the store.
chmod 0755 "$scratch" "$scratch/nginx"
/usr/sbin/nginx -c "$scratch/nginx/nginx.conf" &
nginx=$!
trap 'kill $nginx 2>/dev/null || true; rm -rf "$scratch"' EXIT
sleep 0.5
url_before="http://127.0.0.1:$port/before"
url_after="http://127.0.0.1:$port/after"

# The reader's per-user local key (both compilers sign their local
# entries with it); the writers that fill the remotes have another one, as
# a CI machine would: a reader must not trust a remote entry only because
# its own local key signed it.
export SUPERSTEP_LOCAL_CACHE_KEY="$scratch/local.key"
writer_local="$scratch/writer-local.key"
"$after" cache keygen --output "$scratch/writer.key" > "$scratch/writer.pub" 2>/dev/null
public="$(cat "$scratch/writer.pub")"

# One timed run: prints seconds.
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" > "$scratch/out.txt" 2> "$scratch/err.txt" || { tail -20 "$scratch/err.txt" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "commit $(git rev-parse --short HEAD); before $before; after $after; $runs runs each"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

# Warm both remotes and both warm local caches.
"$before" build --set "outputs.directory=$scratch/before-warm" > /dev/null 2>&1
"$after" build --set "outputs.directory=$scratch/after-warm" > /dev/null 2>&1
SUPERSTEP_LOCAL_CACHE_KEY="$writer_local" "$before" build --set "outputs.directory=$scratch/before-fill" --cache-remote "$url_before" > /dev/null 2>&1
SUPERSTEP_LOCAL_CACHE_KEY="$writer_local" "$before" sweep --set "outputs.directory=$scratch/before-fill" --cache-remote "$url_before" > /dev/null 2>&1
# The AFTER writer searches first, as a CI job would: the build after it
# compiles the searched plan (kept for the configuration) and uploads it.
SEARCH=(search --rounds 1 --cheapest 1 --aligned 0 --no-orders)
SUPERSTEP_CACHE_SIGNING_KEY_FILE="$scratch/writer.key" SUPERSTEP_LOCAL_CACHE_KEY="$writer_local" \
  "$after" "${SEARCH[@]}" --set "outputs.directory=$scratch/after-fill" --cache-remote "$url_after" > /dev/null 2>&1
SUPERSTEP_CACHE_SIGNING_KEY_FILE="$scratch/writer.key" SUPERSTEP_LOCAL_CACHE_KEY="$writer_local" \
  "$after" build --set "outputs.directory=$scratch/after-fill" --cache-remote "$url_after" > /dev/null 2>&1
SUPERSTEP_CACHE_SIGNING_KEY_FILE="$scratch/writer.key" SUPERSTEP_LOCAL_CACHE_KEY="$writer_local" \
  "$after" sweep --set "outputs.directory=$scratch/after-fill" --cache-remote "$url_after" > /dev/null 2>&1
echo "entries on the server: before $(find "$scratch/nginx/store/before" -type f | wc -l), after $(find "$scratch/nginx/store/after" -type f | wc -l)"
# A second warm run of each, so the outputs folders hold the build's files.
"$before" build --set "outputs.directory=$scratch/before-warm" > /dev/null 2>&1
"$after" build --set "outputs.directory=$scratch/after-warm" > /dev/null 2>&1

declare -A times
for run in $(seq "$runs"); do
  times[warm-local-before]+="$(timed "$before" build --set "outputs.directory=$scratch/before-warm") "
  times[warm-local-after]+="$(timed "$after" build --set "outputs.directory=$scratch/after-warm") "
  rm -rf "$scratch/fresh"
  times[remote-build-before]+="$(timed "$before" build --set "outputs.directory=$scratch/fresh" --cache-remote "$url_before") "
  rm -rf "$scratch/fresh"
  times[remote-build-after]+="$(timed "$after" build --set "outputs.directory=$scratch/fresh" --cache-remote "$url_after" --cache-trusted-key "$public") "
  cp "$scratch/err.txt" "$scratch/remote-build-after.err"
  rm -rf "$scratch/fresh"
  times[remote-sweep-before]+="$(timed "$before" sweep --set "outputs.directory=$scratch/fresh" --cache-remote "$url_before") "
  rm -rf "$scratch/fresh"
  times[remote-sweep-after]+="$(timed "$after" sweep --set "outputs.directory=$scratch/fresh" --cache-remote "$url_after" --cache-trusted-key "$public") "
  rm -rf "$scratch/fresh"
  times[untrusted-after]+="$(timed "$after" build --set "outputs.directory=$scratch/fresh" --cache-remote "$url_after") "
  rm -rf "$scratch/fresh"
  times[remote-search-after]+="$(timed "$after" "${SEARCH[@]}" --set "outputs.directory=$scratch/fresh" --cache-remote "$url_after" --cache-trusted-key "$public") "
  rm -rf "$scratch/fresh"
  echo "run $run done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
for case in warm-local-before warm-local-after remote-build-before remote-build-after \
  remote-sweep-before remote-sweep-after untrusted-after remote-search-after; do
  printf '%-20s median %6.2f s   runs: %s\n' "$case" \
    "$(echo "${times[$case]}" | tr ' ' '\n' | grep . | median)" "${times[$case]}"
done
echo "the last signed-remote build's cache line and warnings:"
grep -E "^cache|^warning" "$scratch/remote-build-after.err" || true
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
