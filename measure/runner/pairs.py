"""Reading a pairs file, refusing what would turn into a wrong measurement (file:line errors)."""
from __future__ import annotations

from pathlib import Path

from bundle_kit import contract, rankstats

from measure.errors import MeasureError


def read_pairs(path: Path) -> list[dict]:
    """Every pair of the file, its fields checked: present, strings, `pair_id` unique."""
    try:
        rows = rankstats.read_jsonl(path, contract.PAIR_ROW)
    except rankstats.FixtureError as exc:
        raise MeasureError(str(exc)) from None
    first_line: dict[str, int] = {}
    for row in rows:
        line = row["_line"]
        for name in contract.PAIR_ROW:
            value = row[name]
            if not isinstance(value, str):
                raise MeasureError(f"{path}:{line}: field {name!r} must be a string, "
                                   f"not {type(value).__name__} ({value!r})")
        if row["pair_id"] in first_line:
            raise MeasureError(f"{path}:{line}: pair_id {row['pair_id']!r} repeats the pair on "
                               f"line {first_line[row['pair_id']]}")
        first_line[row["pair_id"]] = line
    return [{name: row[name] for name in contract.PAIR_ROW} for row in rows]


def load_pairs(path: Path, dimensions: list[str] | tuple[str, ...] | None,
               max_pairs: int | None) -> list[dict]:
    """The pairs to measure: the file's, restricted to `dimensions` and to at most `max_pairs`
    pairs per dimension, in file order."""
    rows = read_pairs(path)
    known = list(dict.fromkeys(r["dimension"] for r in rows))
    if dimensions:
        unknown = [d for d in dimensions if d not in known]
        if unknown:
            raise MeasureError(f"--dimensions: {', '.join(unknown)} not in {path} "
                               f"(it has {', '.join(known)})")
        rows = [r for r in rows if r["dimension"] in dimensions]
    if max_pairs is not None:
        kept, seen = [], {}
        for r in rows:
            seen[r["dimension"]] = seen.get(r["dimension"], 0) + 1
            if seen[r["dimension"]] <= max_pairs:
                kept.append(r)
        rows = kept
    if not rows:
        raise MeasureError(f"{path}: no pairs to measure")
    return rows
