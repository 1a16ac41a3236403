#!/usr/bin/env python3
"""How far the layouts of the shipped models could go (docs/measurements.md,
"How far layouts could go").

For one transformer layer of each shipped model, a continuous floor of the
estimate over every partition of its matrix products and attention, set
beside the compiled program's own per-layer figures (`superstep phases
--json`, uncached, the shipped build files):

- Communication, per matrix product `[m, k] x [k, n]` on P tiles: the
  least, over real row, column and reduction parts R x C x K = P, of the
  words one tile receives: its operand block less its share of the
  producer's output, its weight block less the 1/R of it it stores, and
  the partial sums of its output block it reduces (activations and partial
  sums FP16, weights FP8). By the Loomis-Whitney inequality a tile doing
  1/P of the products' work needs blocks whose product is at least that
  work squared, so no split of the work receives less; the blocks here are
  real numbers, schedules reach their bounds exactly, and phases cost no
  setup.
- Communication of attention over H heads: the least, over real query and
  key parts with QP x KP = P / H, of a tile's query block, key and value
  blocks and the FP16 partial outputs it merges (statistics ignored).
- Compute: the products at the FP8 matrix rate on every tile, attention's
  two products at the FP16 rate without padding plus one exponential per
  score, GELU's one transcendental per element; norms, reductions, adds
  and copies cost nothing.

The floor is an estimate of the room left, not a proof about every
program: phases that merge two products' traffic can share a busy tile's
time, which the per-product floors add.

usage: scripts/measurements/layout_floor.py [BINARY]
"""

import json
import math
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TILES = 1472
FP8_MACS_PER_CYCLE = 128
FP16_MACS_PER_CYCLE = 64
CYCLES_PER_MS = 1.5e6

MODELS = [
    # name, build file, width, MLP, tokens, heads, head dimension, layers
    ("SigLIP so400m", "queries/siglip-so400m.toml", 1152, 4304, 729, 16, 72, 27),
    ("PE-Core-L14", "queries/pe-core-l14.toml", 1024, 4096, 577, 16, 64, 24),
    ("ViT-B/16", "queries/vit-b16.toml", 768, 3072, 197, 12, 64, 12),
]

STEPS = 240


def product_floor(m, k, n):
    """(words, R, C, K): the least words one tile receives for the product."""
    best = None
    for i in range(STEPS + 1):
        rows = math.exp(math.log(TILES) * i / STEPS)
        for j in range(STEPS + 1):
            cols = math.exp(math.log(TILES / rows) * j / STEPS)
            reduction = TILES / (rows * cols)
            operand = (m / rows) * (k / reduction)
            weight = (k / reduction) * (n / cols)
            output = (m / rows) * (n / cols)
            received = (
                2 * max(operand - m * k / TILES, 0)
                + weight * (1 - 1 / rows)
                + 2 * output * (reduction - 1) / reduction
            )
            words = received / 4
            if best is None or words < best[0]:
                best = (words, rows, cols, reduction)
    return best


def attention_floor(heads, tokens, dimension):
    """(words, QP, KP): the least words one attention tile receives."""
    best = None
    per_head = TILES / heads
    for i in range(STEPS + 1):
        queries = math.exp(math.log(per_head) * i / STEPS)
        keys = per_head / queries
        received = (
            2 * dimension * tokens / queries
            + 2 * 2 * dimension * tokens / keys
            + 2 * dimension * (tokens / queries) * (keys - 1) / keys
        )
        words = received / 4
        if best is None or words < best[0]:
            best = (words, queries, keys)
    return best


def program_per_layer(binary, query):
    """The compiled program's cycles per layer: exchange (horizon, setup,
    sync and patching) and compute (kernels, copies, fills)."""
    command = [binary, "phases", query, "--json", "--no-cache"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    exchange = compute = 0
    for line in json.loads(result.stdout):
        if not (line["key"].startswith("layer.") or line["key"].startswith("repeat.carry")):
            continue
        if line["kind"] == "exchange":
            exchange += line["cycles"]
        else:
            compute += line["cycles"]
    return exchange, compute


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/superstep")
    print("| model | per layer | program | floor | program / floor |")
    print("|---|---|---:|---:|---:|")
    details = []
    for name, query, width, mlp, tokens, heads, dimension, layers in MODELS:
        products = [
            ("qkv", tokens, width, 3 * width),
            ("out", tokens, width, width),
            ("up", tokens, width, mlp),
            ("down", tokens, mlp, width),
        ]
        exchange_floor = 0.0
        compute_floor = 0.0
        for label, m, k, n in products:
            words, rows, cols, reduction = product_floor(m, k, n)
            exchange_floor += words
            compute_floor += m * k * n / TILES / FP8_MACS_PER_CYCLE
            details.append(
                f"{name} {label} [{m}, {k}] x [{k}, {n}]: {words:,.0f} words "
                f"at {rows:.1f} x {cols:.1f} x {reduction:.1f}"
            )
        words, queries, keys = attention_floor(heads, tokens, dimension)
        exchange_floor += words
        details.append(f"{name} attention: {words:,.0f} words at {queries:.1f} x {keys:.1f}")
        scores = heads * tokens * tokens
        compute_floor += 2 * scores * dimension / TILES / FP16_MACS_PER_CYCLE
        compute_floor += scores / TILES
        compute_floor += tokens * mlp / TILES
        exchange, compute = program_per_layer(binary, query)
        for part, program, floor in [
            ("exchange", exchange, exchange_floor),
            ("compute", compute, compute_floor),
            ("both", exchange + compute, exchange_floor + compute_floor),
        ]:
            print(f"| {name} | {part} | {program:,.0f} | {floor:,.0f} | {program / floor:.2f}x |")
        total_floor = (exchange_floor + compute_floor) * layers
        details.append(
            f"{name}: the layers' floor x {layers} = {total_floor:,.0f} cycles "
            f"= {total_floor / CYCLES_PER_MS:.3f} ms"
        )
    print()
    for line in details:
        print(f"- {line}")


if __name__ == "__main__":
    main()
