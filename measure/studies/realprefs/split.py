"""The realprefs training and evaluation sides, made by group with a seeded rule (issue 30).

A pair's side is decided by its `group` alone (`data.Pair.group`: the normalised first human turn
of an HH dialogue, the post or article of a summary), so no first human turn, no prompt (a
prompt fixes its first human turn) and no post or article is on both sides. The group keys are
shared across objectives: the two HH groups that hold both helpfulness and harmlessness pairs
go to one side. The rule:

    u(group) = first 8 bytes of sha256("realprefs-split:<SEED>:<group>") / 2**64
    side     = "eval" if u(group) < EVAL_SHARE else "train"

`data/realprefs/split.json` records the seed, the rule, the counts, the sha256 of each source
file and the pair ids of each side per objective; `python -m measure.studies.realprefs.split`
rewrites it, and `load_split` refuses a file that the rule does not regenerate.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from measure.errors import MeasureError
from measure.studies.realprefs import budget
from measure.studies.realprefs.data import DATA, OBJECTIVES, SOURCES, load_pairs, provenance

SEED = 30
EVAL_SHARE = 0.30
MIN_EVAL = 500  # held-out pairs per objective the instruments need (issue 30)
SPLIT_FILE = DATA / "realprefs" / "split.json"
RULE = ('side = "eval" if int.from_bytes(sha256(f"realprefs-split:{seed}:{group}".encode()).digest()[:8], '
        '"big") / 2**64 < eval_share else "train"; group = data.Pair.group')


def draw(group: str, seed: int = SEED) -> float:
    """The group's uniform draw in [0, 1) under `seed`."""
    digest = hashlib.sha256(f"realprefs-split:{seed}:{group}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def side(group: str, seed: int = SEED, share: float = EVAL_SHARE) -> str:
    """`eval` or `train`: the side of every pair of `group`."""
    return "eval" if draw(group, seed) < share else "train"


def make_split(pairs, seed: int = SEED, share: float = EVAL_SHARE) -> dict:
    """The split document of `pairs` (`data.Pair`s): seed, rule, counts and the ids of each side
    per objective, in load order. Refuses a split with under MIN_EVAL held-out pairs in an
    objective."""
    ids = {s: {o: [] for o in OBJECTIVES} for s in ("train", "eval")}
    groups = {s: {o: set() for o in OBJECTIVES} for s in ("train", "eval")}
    for p in pairs:
        s = side(p.group, seed, share)
        ids[s][p.objective].append(p.pair_id)
        groups[s][p.objective].add(p.group)
    counts = {o: {"train_pairs": len(ids["train"][o]), "eval_pairs": len(ids["eval"][o]),
                  "train_groups": len(groups["train"][o]), "eval_groups": len(groups["eval"][o])}
              for o in OBJECTIVES}
    short = [o for o in OBJECTIVES if counts[o]["eval_pairs"] < MIN_EVAL]
    if short:
        raise MeasureError(f"seed {seed}, share {share}: under {MIN_EVAL} held-out pairs in {', '.join(short)}")
    sources = {}
    for name, (folder, rel, objective, _fmt) in SOURCES.items():
        sources[name] = {"objective": objective, "file": f"data/{folder}/{rel}",
                         "sha256": provenance(folder)["files"][rel]["sha256"]}
    return {
        "study": "realprefs",
        "seed": seed,
        "eval_share": share,
        "rule": RULE,
        "grouping": "HH: normalised first human turn (data.normalise of data.first_human_turn); "
                    "summaries: the post or article id (data.Pair.group)",
        "sources": sources,
        "token_budget": budget.RULE,
        "counts": counts,
        "eval": ids["eval"],
        "train": ids["train"],
    }


def split_text(pairs, seed: int = SEED, share: float = EVAL_SHARE) -> str:
    """split.json as written: indented JSON, one id a line."""
    return json.dumps(make_split(pairs, seed, share), indent=1, ensure_ascii=False) + "\n"


def load_split(pairs, path: Path = SPLIT_FILE) -> dict[str, str]:
    """{pair_id: 'train' | 'eval'} from the committed split file, after checking that it is the
    file the rule writes for `pairs`; one-line error otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MeasureError(f"{path}: cannot read the split ({exc.strerror}); "
                           f"python -m measure.studies.realprefs.split writes it") from None
    if text != split_text(pairs):
        raise MeasureError(f"{path}: not the split the rule gives for the verified data; "
                           f"python -m measure.studies.realprefs.split rewrites it")
    doc = json.loads(text)
    return {pid: s for s in ("train", "eval") for o in OBJECTIVES for pid in doc[s][o]}


def main(argv: list[str] | None = None) -> int:
    """Write data/realprefs/split.json from the verified data and print its counts; exit 2 with
    one line on any problem."""
    if argv:
        print("usage: python -m measure.studies.realprefs.split (no arguments)", file=sys.stderr)
        return 2
    try:
        pairs = load_pairs()
        text = split_text(pairs)
        SPLIT_FILE.parent.mkdir(parents=True, exist_ok=True)
        tmp = SPLIT_FILE.with_name(f".{SPLIT_FILE.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(SPLIT_FILE)
        for objective, c in json.loads(text)["counts"].items():
            print(f"{objective}: train {c['train_pairs']} pairs ({c['train_groups']} groups), "
                  f"eval {c['eval_pairs']} pairs ({c['eval_groups']} groups)")
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
