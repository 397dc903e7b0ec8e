"""The MiniLM study's preference pairs: hand-written seeds expanded by documented mutations.

`data/minilm/seeds.yaml` holds the seeds (written by hand for this project). `expand()` turns
each seed into `VARIANTS` rows by deterministic mutations that leave the pair's contrast alone:

- `m0`: the seed as written;
- `m1`, `m2`: the prompt inside a framing template (`FRAMES`, chosen by the seed's index);
- `m3`: every person's name swapped for another (`NAMES`, the same swap in prompt and both
  responses) when the seed names someone; otherwise a third framing template.

Rows of one seed share its `seed_id`; the last `HELDOUT_PER_DIMENSION` seeds of each dimension,
in the order written, form the held-out split (split by seed, never by row). Running
`python -m measure.studies.minilm.data` rewrites `data/minilm/pairs.jsonl`; a test checks it is current.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from measure.errors import MeasureError
from measure.runner.jsonio import jsonl_text

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "minilm"
SEEDS_FILE = DATA_DIR / "seeds.yaml"
PAIRS_FILE = DATA_DIR / "pairs.jsonl"
DIMENSIONS = ("helpfulness", "safety", "verbosity", "sycophancy", "formatting", "confidence",
              "correctness", "refusal_quality", "factuality", "instruction_following",
              "code_correctness", "math_correctness")
MIN_SEEDS = 8
HELDOUT_PER_DIMENSION = 4
VARIANTS = 4
FRAMES = ("Question: {p}", "{p} Thanks in advance.", "Hi there. {p}",
          "I was wondering about this. {p}", "Quick one for you. {p}")
NAMES = {"Maria": "Elena", "Tomas": "Daniel", "Priya": "Anika", "Kenji": "Hiro",
         "Amara": "Zola", "Lukas": "Jonas", "Sofia": "Clara", "Omar": "Yusuf"}
_NAME_RE = re.compile(r"\b(" + "|".join(NAMES) + r")\b", re.IGNORECASE)


def load_seeds(path: Path = SEEDS_FILE) -> dict[str, list[dict]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if list(data) != list(DIMENSIONS):
        raise MeasureError(f"{path}: dimensions must be, in order, {', '.join(DIMENSIONS)}")
    for dimension, seeds in data.items():
        if len(seeds) < MIN_SEEDS:
            raise MeasureError(f"{path}: {dimension} has {len(seeds)} seeds (at least {MIN_SEEDS})")
        for k, seed in enumerate(seeds):
            if sorted(seed) != ["chosen", "prompt", "rejected"] or seed["chosen"] == seed["rejected"]:
                raise MeasureError(f"{path}: {dimension} seed {k}: needs prompt, chosen, rejected (differing)")
    return data


def swap_names(text: str) -> str:
    def repl(match):
        word = match.group(0)
        new = NAMES[word.capitalize()]
        return new.lower() if word.islower() else new
    return _NAME_RE.sub(repl, text)


def has_name(seed: dict) -> bool:
    return any(_NAME_RE.search(seed[f]) for f in ("prompt", "chosen", "rejected"))


def variants(seed: dict, index: int) -> list[tuple[str, dict]]:
    """[(mutation, {prompt, chosen, rejected})] for one seed, `VARIANTS` of them."""
    frame = lambda j: FRAMES[(index + j) % len(FRAMES)]  # noqa: E731
    out = [("seed", dict(seed))]
    for j in (0, 1):
        out.append((f"frame:{frame(j)}", dict(seed, prompt=frame(j).format(p=seed["prompt"]))))
    if has_name(seed):
        out.append(("names", {f: swap_names(seed[f]) for f in ("prompt", "chosen", "rejected")}))
    else:
        out.append((f"frame:{frame(2)}", dict(seed, prompt=frame(2).format(p=seed["prompt"]))))
    return out[:VARIANTS]


def expand(seeds: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for dimension, items in seeds.items():
        for k, seed in enumerate(items):
            seed_id = f"{dimension}-s{k:02d}"
            split = "heldout" if k >= len(items) - HELDOUT_PER_DIMENSION else "train"
            for j, (mutation, text) in enumerate(variants(seed, k)):
                rows.append({"dimension": dimension, "pair_id": f"{seed_id}-m{j}", "seed_id": seed_id,
                             "prompt": text["prompt"], "chosen": text["chosen"],
                             "rejected": text["rejected"], "split": split, "mutation": mutation})
    return rows


def pairs_text() -> str:
    return jsonl_text(expand(load_seeds()))


if __name__ == "__main__":
    PAIRS_FILE.write_text(pairs_text(), encoding="utf-8")
    print(f"wrote {PAIRS_FILE}", file=sys.stderr)
