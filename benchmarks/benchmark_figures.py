"""Render a study-sized set of figures cold (empty SVG cache) and again warm, and compare.

Synthetic fixtures the size of an 8B study (32 layers -> 65 components, 12 dimensions,
20 pairs each) are written to a temporary folder, so the numbers do not depend on which
studies are committed. Usage: python benchmarks/benchmark_figures.py [--repeat N]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from site_src.figures import FigureContext, figure_assets, render_figure  # noqa: E402
from site_src.figures import render as fig_render  # noqa: E402
from site_src.receipts import Resolved  # noqa: E402

DIMS = [f"dim{i:02d}" for i in range(12)]
LAYERS, PAIRS = 32, 20


def write_fixtures(folder: Path) -> None:
    rng = random.Random(0)
    comps = [("embed", "embed", -1)] + [(f"{k}_L{i}", k, i) for i in range(LAYERS) for k in ("attn", "mlp")]
    attr, patch, lens = [], [], []
    for dim in DIMS:
        for p in range(PAIRS):
            margin = round(rng.uniform(-1, 3), 8)
            base = dict(model="bench", dimension=dim, pair_id=f"{dim}-{p}", seed_id=f"{dim}-s{p // 4}")
            for comp, kind, layer in comps:
                attr.append(dict(base, component=comp, kind=kind, layer=layer,
                                 attribution=round(rng.gauss(0, 0.2), 8), margin=margin))
                if comp != "embed":
                    patched = round(margin + rng.gauss(0, 0.1), 8)
                    patch.append(dict(base, component=comp, kind=kind, layer=layer, mode="mean", clean_margin=margin,
                                      patched_margin=patched, effect=round(patched - margin, 8)))
            for layer in range(LAYERS):
                lens.append(dict(base, layer=layer, running_margin=round(margin * ((layer + 1) / LAYERS) ** 2, 8)))
    for name, rows in (("attribution_per_pair.jsonl", attr), ("patching_per_pair.jsonl", patch),
                       ("lens_per_pair.jsonl", lens)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng2 = random.Random(1)
    golden = {"per_dimension_rho": {d: round(rng2.uniform(-0.5, 0.3), 6) for d in DIMS}}
    cos = {"labels": DIMS, "values": [[1.0 if i == j else round(rng2.uniform(-1, 1), 3) for j in range(12)] for i in range(12)]}
    (folder / "golden.json").write_text(json.dumps({**golden, "cosines": cos}, indent=2))


def context(folder: Path, cache: Path) -> FigureContext:
    def resolve_ref(ref: str) -> Resolved:
        name, _, key = ref.partition("#")
        name = name.split("|")[0].strip()
        value = json.loads((folder / name).read_text())[key] if key else None
        return Resolved(value, name, None, ref, f"source/{name}")

    return FigureContext(lambda name: folder / name, resolve_ref, lambda r, text: f"<span>{text}</span>", cache, "assets/")


SPECS = [
    ("rank_scatter", {"id": "a", "data": {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl"}}),
    ("rho_bars", {"id": "b", "data": {"series": [{"label": "x", "ref": "golden.json#per_dimension_rho"}]}}),
    ("patch_picker", {"id": "c", "data": {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl"}}),
    ("top_lists", {"id": "d", "data": {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl"}}),
    ("lens_curve", {"id": "e", "data": {"lens": "lens_per_pair.jsonl"}}),
    ("margin_distribution", {"id": "f", "data": {"pairs": "attribution_per_pair.jsonl"}}),
    ("heatmap", {"id": "g", "data": {"matrix": "golden.json#cosines"}}),
]


def run(ctx: FigureContext) -> tuple[float, int]:
    before = fig_render.rendered_count(ctx.cache_dir)
    start = time.perf_counter()
    for kind, spec in SPECS:
        render_figure(kind, spec, ctx)
    figure_assets(ctx.cache_dir)
    return time.perf_counter() - start, fig_render.rendered_count(ctx.cache_dir) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm runs to average (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_fixtures(folder)
        ctx = context(folder, folder / "cache")
        cold, rendered = run(ctx)
        warm_runs = [run(ctx) for _ in range(args.repeat)]
        warm = sum(t for t, _ in warm_runs) / len(warm_runs)
        print(f"figures: {len(SPECS)} kinds, light + dark ({2 * (len(SPECS) - 1)} SVGs), runtime bundle")
        print(f"cold (empty cache): {cold:8.3f} s   SVGs rendered: {rendered}")
        print(f"warm (cache hits):  {warm:8.3f} s   SVGs rendered: {max(r for _, r in warm_runs)}")
        print(f"ratio cold / warm:  {cold / warm:8.1f}x")


if __name__ == "__main__":
    main()
