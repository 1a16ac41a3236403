"""Save-to-new-build time of `superstep watch` during a cold SigLIP build.

usage: python3 scripts/measurements/watch_cancel.py BINARY SECONDS_INTO_BUILD

Copies queries/siglip-so400m.toml into a temporary folder, starts
`BINARY watch COPY --no-cache --no-artifacts --exit-after 1`, waits for its
`building` line, waits SECONDS_INTO_BUILD, appends a comment to the copy (a
content change) and prints the time from that save to the next
`building`/`rebuilding` line (the new build's start), with the watcher's
headline lines time-stamped. A watcher that cancels the stale build starts
the new one within the quiet period; one that waits starts it when the
stale build ends.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

if len(sys.argv) != 3:
    raise SystemExit(__doc__)
binary, into = sys.argv[1], float(sys.argv[2])
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
folder = tempfile.mkdtemp(prefix="watch-cancel-")
path = os.path.join(folder, "siglip.toml")
shutil.copy(os.path.join(root, "queries", "siglip-so400m.toml"), path)
start = time.monotonic()
child = subprocess.Popen(
    [binary, "watch", path, "--no-cache", "--no-artifacts", "--exit-after", "1"],
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    bufsize=1,
)
lines = []
event = threading.Condition()


def read():
    for line in child.stdout:
        with event:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
            event.notify_all()


threading.Thread(target=read, daemon=True).start()


def wait_for(predicate, after=0):
    with event:
        while True:
            for index in range(after, len(lines)):
                if predicate(lines[index][1]):
                    return index
            if child.poll() is not None and not event.wait(1):
                raise SystemExit("the watcher exited:\n" + "\n".join(l for _, l in lines))
            event.wait(1)


try:
    first = wait_for(lambda line: line.startswith("building "))
    time.sleep(into)
    with open(path, "a") as file:
        file.write("\n# edited while building\n")
    saved = time.monotonic() - start
    second = wait_for(lambda line: line.startswith(("building ", "rebuilding ")), first + 1)
finally:
    child.kill()
    child.wait()
    shutil.rmtree(folder, ignore_errors=True)
for stamp, line in lines:
    if line.startswith(("building", "rebuilding", "==", "watching", "layouts")):
        print(f"{stamp:9.3f} s  {line}")
print(f"saved at {saved:.3f} s; the first build started at {lines[first][0]:.3f} s")
print(f"save to the new build's start: {lines[second][0] - saved:.3f} s")
