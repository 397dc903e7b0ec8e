"""The MiniLM study's preference pairs (issue 21): hand-written seeds, two rows each, five folds by seed.

`data/minilm/seeds.yaml` holds the seeds, written for this project: twelve dimensions in the order
of `DIMENSIONS`, at least `MIN_SEEDS` each, every seed with its `id` (`<dimension>-NN`, numbered
from 01 in the order written), a `prompt`, a `chosen` and a `rejected` response. The authoring
rules, and the surface cues they keep balanced within every dimension (`balance.py`), are in
`data/minilm/README.md`.

`expand()` makes two rows of each seed, which share its `seed_id`: `m0`, the seed as written, and
`m1`, its prompt inside one framing template (`FRAMES`), which leaves both responses alone. Seed
`k` of a dimension (counted from 0) is in fold `k mod FOLDS`; its template is picked so that every
fold holds several templates and every template appears in training. `python -m
measure.studies.minilm.data` rewrites `data/minilm/pairs.jsonl`; a test checks it is current.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from measure.errors import MeasureError
from measure.runner.jsonio import jsonl_text

REPO = Path(__file__).resolve().parents[3]
DATA_DIR = REPO / "data" / "minilm"
SEEDS_FILE = DATA_DIR / "seeds.yaml"
PAIRS_FILE = DATA_DIR / "pairs.jsonl"
DIMENSIONS = ("helpfulness", "safety", "verbosity", "sycophancy", "formatting", "confidence",
              "correctness", "refusal_quality", "factuality", "instruction_following",
              "code_correctness", "math_correctness")
MIN_SEEDS = 20
FOLDS = 5
FIELDS = ("id", "prompt", "chosen", "rejected")
FRAMES = ("Question: {p}", "{p} Thanks in advance.", "Hi there. {p}",
          "I was wondering about this. {p}", "Quick one for you. {p}")


def _where(path: Path, node) -> str:
    try:
        shown = path.relative_to(REPO)
    except ValueError:
        shown = path
    return f"{shown}:{node.start_mark.line + 1}"


def load_seeds(path: Path = SEEDS_FILE) -> dict[str, list[dict]]:
    """{dimension: [seed, ...]} in file order; every problem is one MeasureError naming FILE:LINE."""
    path = Path(path)
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise MeasureError(f"{path}{line}: cannot read the seeds ({str(exc).splitlines()[0]})") from None
    if not isinstance(root, yaml.MappingNode):
        raise MeasureError(f"{path}:1: the seeds file is a mapping of dimension to a list of seeds")
    names = [k.value for k, _ in root.value]
    if names != list(DIMENSIONS):
        raise MeasureError(f"{_where(path, root)}: dimensions must be, in order, {', '.join(DIMENSIONS)} "
                           f"(found {', '.join(map(str, names))})")
    out, ids = {}, set()
    for key, items in root.value:
        d = key.value
        if not isinstance(items, yaml.SequenceNode) or len(items.value) < MIN_SEEDS:
            n = len(items.value) if isinstance(items, yaml.SequenceNode) else 0
            raise MeasureError(f"{_where(path, key)}: {d} has {n} seeds (at least {MIN_SEEDS})")
        out[d] = []
        for k, node in enumerate(items.value):
            where = _where(path, node)
            if not isinstance(node, yaml.MappingNode):
                raise MeasureError(f"{where}: a seed is a mapping of {', '.join(FIELDS)}")
            seed = {}
            for fk, fv in node.value:
                if fk.value in seed:
                    raise MeasureError(f"{_where(path, fk)}: {fk.value!r} given twice")
                if not isinstance(fv, yaml.ScalarNode) or fv.tag != "tag:yaml.org,2002:str" or not fv.value.strip():
                    raise MeasureError(f"{_where(path, fk)}: {fk.value} must be non-empty text")
                seed[fk.value] = fv.value
            if tuple(sorted(seed)) != tuple(sorted(FIELDS)):
                raise MeasureError(f"{where}: a seed has exactly the fields {', '.join(FIELDS)} "
                                   f"(found {', '.join(seed)})")
            expected = f"{d}-{k + 1:02d}"
            if seed["id"] != expected:
                raise MeasureError(f"{where}: seed id {seed['id']!r} should be {expected!r} (numbered in file order)")
            if seed["chosen"] == seed["rejected"]:
                raise MeasureError(f"{where}: {seed['id']}: chosen and rejected are the same text")
            ids.add(seed["id"])
            out[d].append({f: seed[f] for f in FIELDS})
    return out


def fold_of(position: int) -> int:
    """The fold of the seed at `position` (from 0) within its dimension."""
    return position % FOLDS


def frame_of(dimension_index: int, position: int) -> str:
    """The framing template of a seed's `m1` row: it changes from one seed to the next within a
    fold (position // FOLDS) and is shifted per dimension, so no fold owns a template."""
    return FRAMES[(position // FOLDS + dimension_index) % len(FRAMES)]


def expand(seeds: dict[str, list[dict]]) -> list[dict]:
    """Every row: two per seed, dimensions and seeds in file order."""
    rows = []
    for d_index, (dimension, items) in enumerate(seeds.items()):
        for k, seed in enumerate(items):
            frame = frame_of(d_index, k)
            for j, (mutation, prompt) in enumerate((("seed", seed["prompt"]),
                                                    (f"frame:{frame}", frame.format(p=seed["prompt"])))):
                rows.append({"dimension": dimension, "pair_id": f"{seed['id']}-m{j}", "seed_id": seed["id"],
                             "fold": fold_of(k), "prompt": prompt, "chosen": seed["chosen"],
                             "rejected": seed["rejected"], "mutation": mutation})
    return rows


def pairs_text(path: Path = SEEDS_FILE) -> str:
    """pairs.jsonl as `python -m measure.studies.minilm.data` writes it from the seeds file."""
    return jsonl_text(expand(load_seeds(path)))


if __name__ == "__main__":
    PAIRS_FILE.write_text(pairs_text(), encoding="utf-8")
    print(f"wrote {PAIRS_FILE}", file=sys.stderr)
