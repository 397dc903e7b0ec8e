"""Vega-Lite -> Vega -> SVG with vl-convert, cached on disk by the hash of the spec.

One compile per (spec, theme); the static SVG is drawn from the compiled Vega spec, so the page's
static and interactive views come from the same Vega. Nothing may be fetched while rendering
(`allowed_base_urls=[]`), and the `$schema` URLs the tools add are removed.
"""
from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import vl_convert

from safe_io import write_atomic

from . import vl_calls, worker
from .recolour import colour_map
from .svg_slim import NUMERIC, slim_svg
from .theme import FONT, PALETTES

COLOURS = colour_map(PALETTES["light"], PALETTES["dark"])   # for recolouring a light drawing dark

VL_VERSION = "6.4"
# Bump when the post-processing below changes, so stale cache entries are not reused.
PIPELINE_VERSION = "figures-2"   # recoloured dark drawings are the drawn ones: no bump



def rendered_count(cache_dir: Path) -> int:
    """How many specs have been rendered into `cache_dir`: one `<key>.svg` each (how tests and
    benchmarks see real work, without a counter kept for them)."""
    return len(list(Path(cache_dir).glob("*.svg"))) if Path(cache_dir).is_dir() else 0


def spec_key(vl_spec: dict) -> str:
    """The cache key of a Vega-Lite spec: its canonical JSON with the tool and pipeline versions."""
    payload = json.dumps(vl_spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    stamp = f"{vl_convert.__version__}|{VL_VERSION}|{PIPELINE_VERSION}|"
    return hashlib.sha256((stamp + payload).encode()).hexdigest()


def compile_and_render(vl_spec: dict, cache_dir: Path) -> tuple[dict, str]:
    """(Vega spec, SVG text) for a Vega-Lite spec; from the cache when its hash is known."""
    return draw_all([vl_spec], cache_dir)[0]


def draw_all(vl_specs: list[dict], cache_dir: Path, themed: bool = False) -> list[tuple[dict, str]]:
    """(Vega spec, SVG text) of each Vega-Lite spec, from the cache when its hash is known; the
    others are drawn by the vl-convert worker processes (site_src/figures/worker.py), or here
    when none can: the same calls either way. With `themed`, the first half of the specs are the
    light themes of the second half's: each pair is drawn as one (vl_calls.draw_pair)."""
    return finish_draws(start_draws(vl_specs, cache_dir, themed))


def start_draws(vl_specs: list[dict], cache_dir: Path, themed: bool = False) -> tuple:
    """The first half of `draw_all`: read what is cached and hand the rest to the workers at once
    (their queues fill while this process goes on); `finish_draws` collects them."""
    cache_dir = Path(cache_dir)
    out: list = [None] * len(vl_specs)
    todo = {}
    for i, vl_spec in enumerate(vl_specs):
        vl_spec = {k: v for k, v in vl_spec.items() if k != "$schema"}
        key = spec_key(vl_spec)
        vg_path, svg_path = cache_dir / f"{key}.vg.json", cache_dir / f"{key}.svg"
        if vg_path.is_file() and svg_path.is_file():
            out[i] = json.loads(vg_path.read_text("utf-8")), svg_path.read_text("utf-8")
        else:
            todo[i] = (vl_spec, vg_path, svg_path)
    # a draw: (indices it answers, the call's arguments); a pair answers its light and its dark
    half = len(vl_specs) // 2 if themed else 0
    calls = [((i, i + half), ("draw_pair", {"light": todo[i][0], "dark": todo[i + half][0]}))
             for i in range(half) if i in todo and i + half in todo]
    paired = {i for indices, _ in calls for i in indices}
    calls += [((i,), ("draw", {"spec": todo[i][0]})) for i in todo if i not in paired]
    handed = [(indices, op, args, worker.submit(op, **args, **_extra(op))) for indices, (op, args) in calls]
    return cache_dir, out, todo, handed


def _extra(op: str) -> dict:
    return {"vl_version": VL_VERSION, **({"colours": COLOURS} if op == "draw_pair" else {})}


def finish_draws(job: tuple) -> list[tuple[dict, str]]:
    """The second half of `draw_all`: wait for what the workers draw, put it in shape and cache it."""
    cache_dir, out, todo, handed = job
    for indices, op, args, future in handed:
        drawn = worker.result(future)
        if drawn is None:   # no worker could: the same call here
            drawn = (vl_calls.draw_pair(args["light"], args["dark"], VL_VERSION, COLOURS) if op == "draw_pair"
                     else vl_calls.draw(args["spec"], VL_VERSION))
        elif op == "draw":
            drawn = drawn["vega"], drawn["svg"]
        for i, (vg_spec, raw_svg) in zip(indices, drawn if op == "draw_pair" else [drawn]):
            _, vg_path, svg_path = todo[i]
            svg = canonical_ids(raw_svg)
            cache_dir.mkdir(parents=True, exist_ok=True)
            # builds may run side by side (serve + build): never leave a half-written cache entry
            write_atomic(vg_path, json.dumps(vg_spec, sort_keys=True, separators=(",", ":")))
            write_atomic(svg_path, svg)
            out[i] = vg_spec, svg
    return out


# One thread finishes the drawings of deferred figures (see assemble.assemble): it waits for the
# workers and puts their SVG in shape while the page renderer goes on with the next page.
_DRAWING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="figure-draw")


def later(job) -> Future:
    """`job()` on the drawing thread."""
    return _DRAWING.submit(job)


_FONT_ATTR = FONT  # as vl-convert writes it in each <text> (single quotes kept)
_ATTR_VALUE = re.compile(r'\s(?:' + "|".join(NUMERIC) + r')="[^"]*"')
_DECIMALS = re.compile(r"(\d\.\d\d)\d+")
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_INNER_ARIA = re.compile(r'\s+(?:role|aria-[a-z]+)="[^"]*"')
_ID = re.compile(r'\sid="([^"]+)"')


_REF = re.compile(r'(\sid="|url\(#|href="#)([^")]+)')


def canonical_ids(svg: str) -> str:
    """Rename ids to i0, i1, ... in order of appearance.

    Vega numbers gradients and clip paths with a process-wide counter, so the same spec would
    otherwise give different SVG text depending on what was rendered before it.
    """
    names: dict[str, str] = {}
    for old in _ID.findall(svg):
        names.setdefault(old, f"i{len(names)}")
    return _REF.sub(lambda m: m.group(1) + names.get(m.group(2), m.group(2)), svg)


def inline_svg(svg: str, id_prefix: str, css_class: str) -> str:
    """Prepare vl-convert's SVG for inlining in HTML.

    Drops the XML namespaces (the HTML parser supplies them; it also keeps namespace URIs out of
    the page), drops Vega's inner ARIA roles (the container is a single role="img" with a label),
    and prefixes ids so that two figures on one page never share a clip path.
    """
    svg = svg.strip()
    if svg.startswith("<?xml"):
        svg = svg[svg.index("?>") + 2:].lstrip()
    svg = _XMLNS.sub("", svg)
    svg = _INNER_ARIA.sub("", svg)
    # what a static drawing does not need: the default opacity, pointer events (figures.css turns
    # them off), and the one font family on every text (figures.css sets it for .fig-svg text)
    svg = svg.replace(' opacity="1"', "").replace(' pointer-events="none"', "").replace(f' font-family="{_FONT_ATTR}"', "")
    # coordinates to 1/100 px: invisible on screen and in print, and a tenth lighter
    svg = _ATTR_VALUE.sub(lambda m: _DECIMALS.sub(r"\1", m.group(0)), svg)
    ids = set(_ID.findall(svg))
    svg = _REF.sub(lambda m: m.group(1) + (f"{id_prefix}-{m.group(2)}" if m.group(2) in ids else m.group(2)), svg)
    head_end = svg.index(">")
    head = re.sub(r'\sclass="[^"]*"', "", svg[:head_end])
    # the same drawing in fewer bytes (svg_slim.py: shared attributes on groups, hex colours)
    return slim_svg(head.replace("<svg", f'<svg class="{css_class}" aria-hidden="true"', 1) + svg[head_end:])
