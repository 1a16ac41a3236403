#!/usr/bin/env bash
# A layout search split over shards through a signed remote cache
# (docs/measurements.md, "A sharded layout search (issue 46)"): the default
# SigLIP query, one compiler, a real nginx with WebDAV PUT on a loopback
# port (started here, stopped at the end).
#
#   scripts/measurements/sharded_search.sh BINARY [SEARCH FLAGS...]
#
# Default flags: none, the default (quick) search (about 40 trials on
# SigLIP). Runs, each with a fresh local cache, timed with /usr/bin/time:
#   whole    the unsharded search (no remote)
#   shards   --shard 0/2 and --shard 1/2 at once, signing with a writer's
#            key, over the remote (on this 2-core machine the two shards
#            share the cores: their wall is not what two machines give)
#   reader   the same search over the remote, trusting the writer's key
#            (finds the outcome the shards kept)
#   deeper   a deeper search (without --no-orders when the flags have it,
#            else with one more cheapest partition per op), trusting the
#            key: reads the trials it shares with the shards' search (the
#            same override sets) and compiles the rest
# and then compares the plans the runs picked.
set -euo pipefail
binary="$(realpath "$1")"
shift
flags=("$@")
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
chmod 0755 "$scratch" "$scratch/nginx"
/usr/sbin/nginx -c "$scratch/nginx/nginx.conf" &
nginx=$!
trap 'kill $nginx 2>/dev/null || true; rm -rf "$scratch"' EXIT
sleep 0.5
url="http://127.0.0.1:$port/search"
"$binary" cache keygen --output "$scratch/writer.key" > "$scratch/writer.pub" 2>/dev/null
public="$(cat "$scratch/writer.pub")"

echo "commit $(git rev-parse --short HEAD); $binary; flags ${flags[*]:-(none: the default search)}"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

# One search with a fresh local cache in $scratch/NAME; its JSON outcome in
# NAME.json, its time line in NAME.time.
search() {
  local name="$1"
  shift
  SUPERSTEP_LOCAL_CACHE_KEY="$scratch/$name.local.key" /usr/bin/time -f "%e s wall, %U+%S s CPU, %M KB peak" \
    -o "$scratch/$name.time" "$binary" search "${flags[@]}" --json \
    --set "outputs.directory=$scratch/$name" "$@" > "$scratch/$name.json" 2> "$scratch/$name.err" \
    || { tail -20 "$scratch/$name.err" >&2; exit 1; }
}
summary() {
  python3 - "$scratch/$1.json" "$1" "$(cat "$scratch/$1.time")" <<'EOF'
import json, sys
outcome = json.load(open(sys.argv[1]))
# The JSON document holds no wall time: trials per minute from the
# process's own wall (it includes start-up and the final build).
wall = float(sys.argv[3].split(" s wall")[0])
print(f"{sys.argv[2]:<8} {sys.argv[3]}; {outcome['best_cycles']:,} cycles; "
      f"{outcome['trials']} trials, {outcome['compiled_here']} compiled here; "
      f"{outcome['trials'] / max(wall, 1e-9) * 60:.1f} trials per minute of wall")
EOF
}

search whole
summary whole
SUPERSTEP_CACHE_SIGNING_KEY_FILE="$scratch/writer.key" search shard0 --cache-remote "$url" --shard 0/2 &
first=$!
SUPERSTEP_CACHE_SIGNING_KEY_FILE="$scratch/writer.key" search shard1 --cache-remote "$url" --shard 1/2 &
second=$!
wait $first
wait $second
summary shard0
summary shard1
search reader --cache-remote "$url" --cache-trusted-key "$public"
summary reader
deeper=()
for flag in "${flags[@]}"; do [ "$flag" = --no-orders ] || deeper+=("$flag"); done
if [ ${#deeper[@]} -eq ${#flags[@]} ] && [[ " ${flags[*]} " != *" --cheapest "* ]]; then
  deeper+=(--cheapest 3)
fi
flags=("${deeper[@]}")
search deeper --cache-remote "$url" --cache-trusted-key "$public"
summary deeper
python3 - "$scratch" <<'EOF'
import json, sys
plans = {name: json.load(open(f"{sys.argv[1]}/{name}.json")) for name in ["whole", "shard0", "shard1", "reader"]}
# A step's recomputed queries depend on what the process that compiled its
# trial had compiled before: compared without them.
def steps(plan):
    return [{key: value for key, value in step.items() if not key.startswith("recomputed_")}
            for step in plan["steps"]]
same = all(plan["overrides"] == plans["whole"]["overrides"] and steps(plan) == steps(plans["whole"])
           and plan["best_cycles"] == plans["whole"]["best_cycles"] for plan in plans.values())
print("every run picked the unsharded plan:" if same else "PLANS DIFFER:", plans["whole"]["overrides"])
sys.exit(0 if same else 1)
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
