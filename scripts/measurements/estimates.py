#!/usr/bin/env python3
"""The shipped builds' estimates (docs/measurements.md, "Current estimates").

Builds each shipped build file (and SigLIP at batch 2) with the release
binary, uncached, reads the `--json` document the build prints, and prints
the page's table in Markdown with the date, commit, machine and load
average it was taken on. Estimates are the compiler's deterministic model;
only the wall times depend on the machine.

usage: scripts/measurements/estimates.py [BINARY]
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

BUILDS = [
    # The default recipe: FP8 matrix inputs (activations rounded to FP8 at
    # calibrated scales, projections and attention's PV at the FP8 rate).
    ("SigLIP so400m", "queries/siglip-so400m.toml", []),
    # The shipped build files carry no layout overrides: at batch 2 the
    # planner chooses as at batch 1.
    ("SigLIP so400m, batch 2", "queries/siglip-so400m.toml", ["workload.batch=2"]),
    ("PE-Core-L14", "queries/pe-core-l14.toml", []),
    ("ViT-B/16", "queries/vit-b16.toml", []),
    # The same builds under the FP16 recipe (FP8 weights widened on the
    # tile, the FP16 rate): what the reference libraries compute.
    ("SigLIP so400m, `matrix_inputs = fp16`", "queries/siglip-so400m.toml", ["planning.matrix_inputs=fp16"]),
    (
        "SigLIP so400m, batch 2, `fp16`",
        "queries/siglip-so400m.toml",
        ["workload.batch=2", "planning.matrix_inputs=fp16"],
    ),
    ("PE-Core-L14, `fp16`", "queries/pe-core-l14.toml", ["planning.matrix_inputs=fp16"]),
    ("ViT-B/16, `fp16`", "queries/vit-b16.toml", ["planning.matrix_inputs=fp16"]),
]


def build(binary, query, sets, outputs):
    command = [binary, "build", query, "--json", "--no-cache", "--suggestions", "0"]
    command += ["--set", f"outputs.directory={outputs}"]
    for setting in sets:
        command += ["--set", setting]
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return json.loads(result.stdout), wall


def conversion_share(report):
    """The share of the estimate spent in exchange phases that only convert
    layouts (rearranges and the attention's head splits and merge)."""
    back = report["back"]
    conversion = 0
    for phase in back["phases"]:
        key = phase["key"]
        if ".rearrange#" in key or ".split_" in key or ".merge#" in key:
            conversion += phase["horizon"] * phase["executions"]
    return conversion / back["total_cycles"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/superstep")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as outputs:
        for label, query, sets in BUILDS:
            document, wall = build(binary, query, sets, outputs)
            report = document["report"]
            back = report["back"]
            batch = report["batch"]
            quality = back["exchange_quality"]
            per_image = back["milliseconds"] / batch
            rows.append(
                f"| {label} | {back['total_cycles']:,} = {back['milliseconds']:.3f} ms"
                f"{f' ({per_image:.3f} ms per image)' if batch > 1 else ''} "
                f"| {back['compute_cycles']:,} / {back['exchange_cycles']:,} / "
                f"{back['sync_cycles'] + back['patch_cycles']:,} "
                f"| {back['compute_cycles'] / back['compute_roofline_cycles']:.2f}x "
                f"| {quality['horizon_cycles'] / quality['endpoint_bound_cycles']:.3f}x "
                f"| {100 * conversion_share(report):.1f}% "
                f"| {len(back['phases'])} / {back['barriers']} "
                f"| {back['peak_sram_bytes_per_tile']:,} B "
                f"| {wall:.1f} s |"
            )
    print(
        f"Measured {date.today().isoformat()} at {commit} on {platform.machine()} "
        f"with {os.cpu_count()} cores, load average {load:.2f}, by "
        "`python3 scripts/measurements/estimates.py` (release binary, "
        "`build --json --no-cache --suggestions 0`):"
    )
    print()
    print(
        "| build | estimate | compute / exchange / sync and patching (cycles) "
        "| compute vs roofline | exchange vs endpoint bound | conversions' share "
        "| phases / barriers | peak SRAM per tile | cold build wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
