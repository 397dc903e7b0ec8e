"""Reading fixtures for figures; every rank statistic comes from bundle_kit.rankstats."""
from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from bundle_kit import rankstats
from site_src.receipts import Resolved

from .types import FigureContext, FigureError


def spec_data(spec: dict, key: str, default: Any = None) -> Any:
    """The value of `data.KEY` in a figure spec, or `default`; FigureError when it is missing."""
    data = spec.get("data") or {}
    if not isinstance(data, dict):
        raise FigureError(spec_id(spec), "`data` must be a mapping")
    if key not in data:
        if default is not None:
            return default
        raise FigureError(spec_id(spec), f"`data` lacks the key `{key}`")
    return data[key]


def spec_id(spec: dict) -> str:
    """The figure's id, for messages (`?` when it has none)."""
    return str(spec.get("id") or "?")


def options(spec: dict) -> dict:
    """The spec's `options` mapping ({} when absent)."""
    opts = spec.get("options") or {}
    if not isinstance(opts, dict):
        raise FigureError(spec_id(spec), "`options` must be a mapping")
    return opts


def size_option(spec: dict, name: str, default: int, low: int, high: int) -> int:
    """An option that sets an output size (pixels, rows, items): a whole number in [low, high]."""
    value = options(spec).get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FigureError(spec_id(spec), f"option `{name}` must be a whole number from {low} to {high}, not {value!r}")
    return value


_D3_FORMAT = re.compile(r"(?:.?[<>=^])?[-+( ]?[$#]?0?(?P<width>\d*),?(?:\.(?P<precision>\d+))?~?[a-z%]?")


def format_option(spec: dict, name: str, default: str) -> str:
    """A d3 number format option (`.2f`, `+.3f`); its width and precision set the label size."""
    value = options(spec).get(name, default)
    parts = _D3_FORMAT.fullmatch(value) if isinstance(value, str) else None
    if parts is None or any(int(parts[k] or 0) > 40 for k in ("width", "precision")):
        raise FigureError(spec_id(spec), f"option `{name}` must be a d3 number format such as .2f"
                                         f" (width and precision at most 40), not {value!r}")
    return value


def read_rows(ctx: FigureContext, name: str, required=()) -> tuple[Path, list[dict]]:
    """The rows of a JSONL fixture, each holding the `required` fields as finite values. Shared
    between figures: rows are read-only."""
    path = Path(ctx.resolve_path(name))
    if ctx.read_rows is not None:
        return path, ctx.read_rows(name, tuple(required))
    stat = path.stat() if path.exists() else None
    key = (str(path), stat.st_mtime_ns if stat else 0, stat.st_size if stat else 0)
    return path, _read_cached(key, tuple(required))


@lru_cache(maxsize=32)
def _read_cached(key: tuple, required: tuple) -> list[dict]:
    # Keyed by mtime and size, so an edited fixture is read again; rows are treated as read-only.
    return rankstats.read_jsonl(key[0], required)


def file_receipt(ctx: FigureContext, name: str) -> Resolved:
    """A Resolved that names fixture `name` (repo-relative source, published href).

    The generator's resolver knows where a file is published, so ask it for a trivial aggregate
    and keep only the location; callers replace value and expression.
    """
    return ctx.resolve_ref(f"{name} | count")


def computed(base: Resolved, value: Any, expression: str) -> Resolved:
    """A Resolved for a value computed from `base`'s fixture, its receipt naming `expression`."""
    return dataclasses.replace(base, value=value, line=None, expression=expression)


@dataclasses.dataclass
class Ranked:
    """Per dimension: components in model order with scores and ranks from rankstats."""

    dimension: str
    components: list[str]
    attribution_score: dict[str, float]
    patch_score: dict[str, float]
    attribution_rank: dict[str, float]
    patch_rank: dict[str, float]
    kind: dict[str, str]
    layer: dict[str, int]


def rank_components(
    ctx: FigureContext, spec: dict, attribution: str, patching: str, mode: str,
    patch_score: str = "ratio_of_means",
) -> dict[str, Ranked]:
    """Rankings of every dimension, over the components both files cover for `mode`, with the
    patch score `patch_score` (rankstats.PATCH_SCORES; the study's golden.json names its own)."""
    _, attr_rows = read_rows(ctx, attribution, rankstats.ATTRIBUTION_FIELDS)
    _, patch_rows = read_rows(ctx, patching, rankstats.PATCHING_FIELDS)
    # the ranking figures of one study rank the same rows: join and rank them once
    key = (id(attr_rows), id(patch_rows), mode, patch_score)
    known = _RANKED.get(key)
    if known is not None and known[0] is attr_rows and known[1] is patch_rows:
        return known[2]
    ranked = _rank(spec, attribution, patching, mode, attr_rows, patch_rows, patch_score)
    _RANKED[key] = (attr_rows, patch_rows, ranked)   # the rows are kept, so their ids stay theirs
    while len(_RANKED) > 8:
        _RANKED.pop(next(iter(_RANKED)))
    return ranked


_RANKED: dict = {}


def _rank(spec: dict, attribution: str, patching: str, mode: str, attr_rows: list, patch_rows: list,
          patch_score: str) -> dict[str, Ranked]:
    joined = rankstats.join_rows(attr_rows, patch_rows, mode)
    if not joined:
        raise FigureError(
            spec_id(spec),
            f"no (pair, component) of {attribution} has a patching row of mode {mode!r} in {patching}",
        )
    order: dict[str, int] = {}
    kinds: dict[str, str] = {}
    layers: dict[str, int] = {}
    for row in attr_rows:
        order.setdefault(row["component"], len(order))
        kinds.setdefault(row["component"], str(row.get("kind", "")))
        layers.setdefault(row["component"], int(row.get("layer", -1)))
    out = {}
    for dimension, scores in rankstats.component_scores(joined, patch_score).items():
        ranks = rankstats.rankings(scores)
        names = sorted(scores, key=lambda c: order[c])
        out[dimension] = Ranked(
            dimension=dimension,
            components=names,
            attribution_score={c: scores[c][0] for c in names},
            patch_score={c: scores[c][1] for c in names},
            attribution_rank={c: ranks[c][0] for c in names},
            patch_rank={c: ranks[c][1] for c in names},
            kind={c: kinds[c] for c in names},
            layer={c: layers[c] for c in names},
        )
    return out


@dataclasses.dataclass
class RankedSpec:
    """What the ranking kinds share: the spec's options, files and mode, every dimension's
    rankings, and the dimension the static view shows."""
    opts: dict
    mode: str
    attribution: str
    patching: str
    ranked: dict[str, Ranked]
    dimension: str


def ranked_spec(spec: dict, ctx: FigureContext) -> RankedSpec:
    """What the ranking kinds share, read from the spec: options, files, mode, patch score, rankings and the
    dimension shown."""
    opts = options(spec)
    mode = opts.get("mode", "mean")
    patch_score = opts.get("patch_score", "ratio_of_means")   # the one patch score (docs/statistics.md)
    if patch_score not in rankstats.PATCH_SCORES:
        raise FigureError(spec_id(spec), f"option `patch_score` must be one of {', '.join(rankstats.PATCH_SCORES)}, "
                                         f"not {patch_score!r}")
    attribution, patching = spec_data(spec, "attribution"), spec_data(spec, "patching")
    ranked = rank_components(ctx, spec, attribution, patching, mode, patch_score)
    return RankedSpec(opts, mode, attribution, patching, ranked,
                      pick_dimension(spec, ranked, opts.get("dimension")))


def pick_dimension(spec: dict, available, option: str | None) -> str:
    """The dimension the static view shows: the option's, or the first available."""
    available = list(available)
    if option is None:
        return available[0]
    if option not in available:
        raise FigureError(spec_id(spec), f"dimension {option!r} not in the data ({', '.join(available)})")
    return option


def fmt_rank(rank: float) -> str:
    """A rank as text: a whole number, or one decimal for a tie."""
    return str(int(rank)) if float(rank).is_integer() else f"{rank:.1f}"


# ----- off-distribution flags (measure/instruments/offdist.py writes `offdist_flag` on every patching row)
def offdist_label(row: dict) -> str:
    """`flagged`, `no`, or `not scored` (a row without the flag: an older bundle, or too few seeds)."""
    flag = row.get("offdist_flag")
    return "not scored" if flag is None else ("flagged" if flag else "no")


def offdist_counts(patch_rows: list[dict], mode: str, dimension: str) -> dict[str, tuple[int, int]]:
    """{component: (effects flagged, effects scored)} over the pairs of one dimension and mode."""
    out: dict[str, tuple[int, int]] = {}
    for row in patch_rows:
        if row["mode"] != mode or row["dimension"] != dimension or row.get("offdist_flag") is None:
            continue
        flagged, scored = out.get(row["component"], (0, 0))
        out[row["component"]] = (flagged + bool(row["offdist_flag"]), scored + 1)
    return out
