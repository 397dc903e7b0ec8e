#!/usr/bin/env python3
"""Recompute a study's rank correlations from its per-pair rows and compare them with golden.json.

Usage: python reproduce.py [--record] [BUNDLE_DIR]    (default: the folder this file sits in)

With --record it prints, instead of the plain report, a reproduction record (YAML): the
platform, the Python version, the date, the bundle's file-listing sha256 and the full output.
Commit it unedited as reproductions/<study>/<name>.yaml; the site build checks it against the
current bundle and lists it on the study page (see record.py).

Standard library only, Python 3.10 or newer; no GPU, no network. The statistics come from
`rankstats.py` beside this file, the same module the site build and the measurement stage use.

The tolerance is `contract.TOLERANCE` (contract.py beside this file), never a value from the
golden.json being checked: a fixture cannot set its own bar. A golden.json `tolerance` key may
stay as information, but it must equal the contract's, or the check refuses the fixture.

Exit status: 0 when every recomputed value agrees with golden.json within the contract's tolerance,
1 when one does not, 2 when a file is missing or malformed (the message names file and line),
3 on an unexpected error in this script itself.
"""
from __future__ import annotations

import json
import math
import os
import sys

# `python -I` leaves the script's folder off sys.path; rankstats.py ships beside this file.
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

for _kit in ("rankstats", "contract", "record"):
    if not os.path.isfile(os.path.join(HERE, _kit + ".py")):  # e.g. reproduce.py downloaded on its own
        print(f"reproduce.py: {_kit}.py: missing; it ships beside reproduce.py in the bundle zip", file=sys.stderr)
        sys.exit(2)
import contract  # noqa: E402  (needs the path set above)
import rankstats  # noqa: E402
import record  # noqa: E402
from rankstats import FixtureError  # noqa: E402

ATTRIBUTION = contract.ATTRIBUTION
PATCHING = contract.PATCHING
GOLDEN = contract.GOLDEN

_DECODER = json.JSONDecoder()
_WHITESPACE = json.decoder.WHITESPACE


# ---------------------------------------------------------------- golden.json, with line numbers

def _parse_value(text: str, pos: int, path: tuple, starts: dict) -> tuple[object, int]:
    """Decode the JSON value at `pos`, recording where every nested value starts.

    The json module gives no positions, and a tampered value must be reported by its line.
    """
    pos = _WHITESPACE.match(text, pos).end()
    starts[path] = pos
    opener = text[pos:pos + 1]
    if opener not in ("{", "["):
        if text.startswith(("NaN", "Infinity", "-Infinity"), pos):
            raise json.JSONDecodeError("not a finite number", text, pos)
        return _DECODER.raw_decode(text, pos)
    closer = "}" if opener == "{" else "]"
    result: dict | list = {} if opener == "{" else []
    pos = _WHITESPACE.match(text, pos + 1).end()
    if text[pos:pos + 1] == closer:
        return result, pos + 1
    while True:
        if opener == "{":
            if text[pos:pos + 1] != '"':
                raise json.JSONDecodeError("expecting a key in double quotes", text, pos)
            key, pos = json.decoder.scanstring(text, pos + 1)
            if key in result:
                raise json.JSONDecodeError(f"duplicate key {key!r}", text, pos)
            pos = _WHITESPACE.match(text, pos).end()
            if text[pos:pos + 1] != ":":
                raise json.JSONDecodeError("expecting ':'", text, pos)
            value, pos = _parse_value(text, pos + 1, path + (key,), starts)
            result[key] = value
        else:
            value, pos = _parse_value(text, pos, path + (len(result),), starts)
            result.append(value)
        pos = _WHITESPACE.match(text, pos).end()
        mark = text[pos:pos + 1]
        if mark == closer:
            return result, pos + 1
        if mark != ",":
            raise json.JSONDecodeError(f"expecting ',' or '{closer}'", text, pos)
        pos = _WHITESPACE.match(text, pos + 1).end()


class Golden:
    """golden.json's values, each findable by its line."""

    def __init__(self, folder: str):
        path = os.path.join(folder, GOLDEN)
        try:
            with open(path, encoding="utf-8") as handle:
                self.text = handle.read()
        except OSError as exc:
            raise FixtureError(GOLDEN, None, f"cannot open: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise FixtureError(GOLDEN, None, "not UTF-8 text") from None
        starts: dict = {}
        try:
            data, end = _parse_value(self.text, 0, (), starts)
            if self.text[end:].strip():
                raise json.JSONDecodeError("extra data after the object", self.text, end)
        except json.JSONDecodeError as exc:
            raise FixtureError(GOLDEN, exc.lineno, f"not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise FixtureError(GOLDEN, 1, "top level is not a JSON object")
        self.data, self._starts = data, starts

    def line(self, *path) -> int:
        pos = self._starts.get(tuple(path))
        while pos is None and path:  # a missing key: point at its enclosing object
            path = path[:-1]
            pos = self._starts.get(tuple(path))
        return self.text.count("\n", 0, pos or 0) + 1

    def where(self, *path) -> str:
        return f"{GOLDEN}:{self.line(*path)}"

    def get(self, *path, kind: str):
        """The value at `path`, checked to be of `kind`: number, number-or-null, count, text, object."""
        node = self.data
        for key in path:
            if not isinstance(node, dict) or key not in node:
                raise FixtureError(GOLDEN, self.line(*path), f"lacks key {'/'.join(path)}")
            node = node[key]
        if kind == "object" and isinstance(node, dict):
            return node
        if kind == "text" and isinstance(node, str) and node:
            return node
        if kind == "count" and isinstance(node, int) and not isinstance(node, bool) and node >= 0:
            return node
        if kind == "number-or-null" and node is None:
            return None
        if kind in ("number", "number-or-null") and _is_number(node):
            return float(node)
        label = {"number-or-null": "a number (or null)", "count": "a non-negative integer",
                 "text": "a non-empty string", "object": "an object"}.get(kind, f"a {kind}")
        raise FixtureError(GOLDEN, self.line(*path), f"{'/'.join(path)} is {json.dumps(node)}, expected {label}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------- per-pair rows

def _read_rows(folder: str, name: str, required: tuple, numbers: tuple, key: tuple) -> list[dict]:
    """Rows of one JSONL file, each checked for field types; a repeated `key` is an error."""
    path = os.path.join(folder, name)
    try:
        rows = rankstats.read_jsonl(path, required)
    except FixtureError as exc:  # report the bundle-relative name, never an absolute path
        raise FixtureError(name, exc.line, exc.message) from None
    except UnicodeDecodeError:
        raise FixtureError(name, None, "not UTF-8 text") from None
    if not rows:
        raise FixtureError(name, None, "holds no rows")
    with open(path, "rb") as handle:  # a file cut mid-row can still end on a whole line
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            raise FixtureError(name, rows[-1]["_line"], "last line has no newline (file truncated?)")
    seen: dict = {}
    isfinite = math.isfinite
    for row in rows:  # one pass, locals bound: this loop runs once per row of 100k-row studies
        for field in numbers:
            value = row[field]
            if type(value) not in (int, float) or not isfinite(value):
                raise FixtureError(name, row["_line"], f"{field} is {json.dumps(value)}, expected a finite number")
        for field in ("dimension", "component", "mode") if "mode" in key else ("dimension", "component"):
            if type(row[field]) is not str or not row[field]:
                raise FixtureError(name, row["_line"], f"{field} is {json.dumps(row[field])}, expected a non-empty string")
        if type(row["pair_id"]) not in (str, int):
            raise FixtureError(name, row["_line"], f"pair_id is {json.dumps(row['pair_id'])}, expected a string or integer")
        identity = tuple([row[f] for f in key])
        first = seen.setdefault(identity, row["_line"])
        if first != row["_line"]:
            raise FixtureError(name, row["_line"], f"repeats the ({', '.join(key)}) of line {first}")
    return rows


# ---------------------------------------------------------------- the check

def _diff(recomputed: float, published: float | None) -> float:
    if published is None or math.isnan(recomputed):
        both_missing = published is None and math.isnan(recomputed)
        return 0.0 if both_missing else math.inf
    return abs(recomputed - published)


def _rho(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:+.6f}"


def _amount(value: float) -> str:
    if math.isinf(value):
        return "missing"
    return f"{value:.6f}" if value == 0 or value >= 1e-4 else f"{value:.2e}"


def _table(rows: list[list[str]], right: set) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
        for row in rows
    ]


def check(folder: str) -> tuple[list[str], bool]:
    """Recompute everything; return the report's lines and whether it agrees with golden.json."""
    golden = Golden(folder)
    mode = golden.get("rank_mode", kind="text")
    tolerance = contract.TOLERANCE
    if "tolerance" in golden.data:  # information only; it may not differ from the contract's bar
        stated = golden.get("tolerance", kind="number")
        if stated != tolerance:
            raise FixtureError(GOLDEN, golden.line("tolerance"),
                               f"tolerance is {stated:g}, but the check's bar is contract.py TOLERANCE = {tolerance:g}; "
                               "a fixture cannot set its own bar (remove the key or make it equal)")
    published = golden.get("per_dimension_rho", kind="object")
    published_mean = golden.get("mean_rho", kind="number-or-null")
    for dimension in published:
        golden.get("per_dimension_rho", dimension, kind="number-or-null")

    attribution = _read_rows(folder, ATTRIBUTION, rankstats.ATTRIBUTION_FIELDS, ("attribution",),
                             key=("dimension", "pair_id", "component"))
    patching = _read_rows(folder, PATCHING, rankstats.PATCHING_FIELDS, ("clean_margin", "effect"),
                          key=("dimension", "pair_id", "component", "mode"))
    counts = golden.get("counts", kind="object") if "counts" in golden.data else {}
    for name, rows, key in ((ATTRIBUTION, attribution, "attribution_rows"), (PATCHING, patching, "patching_rows")):
        if key in counts:
            expected = golden.get("counts", key, kind="count")
            if expected != len(rows):
                raise FixtureError(name, rows[-1]["_line"], f"holds {len(rows)} rows, but {golden.where('counts', key)} says {expected} (file truncated or edited?)")

    joined = rankstats.join_rows(attribution, patching, mode)
    if not joined:
        modes = sorted({row["mode"] for row in patching})
        raise FixtureError(PATCHING, None, f"no rows of mode {mode!r} (from {golden.where('rank_mode')}) join the attribution rows; modes present: {', '.join(modes)}")
    patch_score = golden.get("patch_score", kind="text") if "patch_score" in golden.data else "mean_ratio"
    if patch_score not in rankstats.PATCH_SCORES:
        raise FixtureError(GOLDEN, golden.line("patch_score"), f"patch_score is {patch_score!r}; known: {', '.join(rankstats.PATCH_SCORES)}")
    scores = rankstats.component_scores(joined, patch_score)
    for dimension, comps in scores.items():
        if len(comps) < 2:
            raise FixtureError(PATCHING, None, f"dimension {dimension!r} has {len(comps)} component ranked both ways; "
                               "a rank correlation needs at least 2")
    rhos = rankstats.dimension_rhos(scores)

    pairs = {(dimension, pair) for dimension, pair, _component in joined}
    ranked = sorted({len(comps) for comps in scores.values()})
    patched = {row["component"] for row in patching if row["mode"] == mode}
    unpatched = sorted({row["component"] for row in attribution} - patched)
    lines = [
        f"bundle check: {golden.data.get('study', os.path.basename(os.path.abspath(folder)))}",
        "",
        *_table([
            ["patching mode", mode],
            *([["patch score", patch_score]] if "patch_score" in golden.data else []),
            ["attribution rows read", str(len(attribution))],
            ["patching rows read", str(len(patching))],
            ["pairs joined", str(len(pairs))],
            ["components ranked both ways", str(ranked[0]) if len(ranked) == 1 else f"{ranked[0]} to {ranked[-1]} (varies by dimension)"],
            ["attributed, not patched", ", ".join(unpatched[:4]) + (f" and {len(unpatched) - 4} more" if len(unpatched) > 4 else "") or "none"],
            ["dimensions", str(len(scores))],
        ], right=set()),
        "",
    ]

    # (disagreement, label, where) for every compared value; the largest one decides.
    comparisons = []
    table = [["dimension", "recomputed", "published", "top attribution", "patch rank", "moves"]]
    for dimension in sorted(set(scores) | set(published)):
        mine = rhos.get(dimension, math.nan)
        theirs = published.get(dimension)
        where = golden.where("per_dimension_rho", dimension)
        comparisons.append((_diff(mine, theirs) if dimension in published else math.inf, f"per_dimension_rho/{dimension}", where))
        if dimension in scores:
            ranks = rankstats.rankings(scores[dimension])
            top = min(ranks, key=lambda c: (ranks[c][0], c))
            patch_rank = ranks[top][1]
            moves = 100 * scores[dimension][top][1]
            row = [dimension, _rho(mine), _rho(theirs) if dimension in published else "not published",
                   top, f"{patch_rank:g} of {len(ranks)}", f"{moves:.4f}%"]
        else:
            row = [dimension, "no rows", _rho(theirs), "", "", ""]
        table.append(row)
    mean_mine = rankstats.mean(rhos.values())
    comparisons.append((_diff(mean_mine, published_mean), "mean_rho", golden.where("mean_rho")))
    table.append(["mean rho", _rho(mean_mine), _rho(published_mean), "", "", ""])
    lines += _table(table, right={1, 2, 5})

    worst, label, where = max(comparisons, key=lambda c: c[0])
    ok = all(diff <= tolerance for diff, _label, _where in comparisons)
    lines += [
        "",
        *_table([
            ["largest disagreement with the fixture", f"{_amount(worst)}  (tolerance {tolerance:g})"],
            ["  where", f"{label}, {where}"],
            ["within tolerance", "yes" if ok else "no"],
        ], right=set()),
    ]
    for diff, label, where in comparisons:
        if not diff <= tolerance:
            lines.append(f"{where}: {label} disagrees by {_amount(diff)}")
    if isinstance(golden.data.get("key_recovery"), dict) and "methods" in golden.data["key_recovery"]:
        more, more_ok = _key_recovery(folder, golden, attribution, patching, tolerance)
        lines, ok = lines + [""] + more, ok and more_ok
    if os.path.isfile(os.path.join(folder, HIDDEN_KEYS_ROWS)):
        more, more_ok = _hidden_keys(folder, golden, tolerance)
        lines, ok = lines + [""] + more, ok and more_ok
    if isinstance(golden.data.get("where"), dict) and isinstance(golden.data.get("null"), dict):
        more, more_ok = _localization(folder, golden, tolerance)
        lines, ok = lines + [""] + more, ok and more_ok
    return lines, ok


LOCALIZATION = ("accuracy", "baselines", "test", "where", "agreement", "relation", "components", "null")


def _localization(folder: str, golden: Golden, tolerance: float):
    """A localization study's point estimates (localize.py): accuracy, the test, where each
    objective lives, agreement, the relation between objectives, the components, the null."""
    localize = _kit("localize")
    for key in localize.FILES.values():
        if not os.path.isfile(os.path.join(folder, key)):
            raise FixtureError(key, None, "missing; a localization bundle holds it")
    try:
        files = localize.read(folder)
    except (OSError, ValueError) as exc:
        raise FixtureError(localize.WEIGHTS, None, f"cannot read it ({exc})") from None
    trained = golden.get("structure", kind="object").get("trained_blocks")
    if not (isinstance(trained, list) and all(isinstance(c, str) for c in trained)):
        raise FixtureError(GOLDEN, golden.line("structure", "trained_blocks"), "structure/trained_blocks is not a list of names")
    try:
        recomputed = localize.headline(files, trained)
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
        raise FixtureError(GOLDEN, None, f"the localization files do not fit together ({type(exc).__name__}: {exc})") from None
    comparisons = []
    for section in LOCALIZATION:
        comparisons += rankstats.compare(golden.data.get(section), recomputed[section], (section,))
    worst = max(comparisons)
    lines = [f"localization: {len(comparisons)} values recomputed from the rows (localize.py)",
             f"  per objective: k80 " + ", ".join(f"{o} {w['k80']}" for o, w in recomputed["where"].items()),
             f"  largest disagreement {_amount(worst[0])} ({worst[1]})"]
    for diff, label in comparisons:
        if not diff <= tolerance:
            lines.append(f"{golden.where(*label.split('/'))}: {label} disagrees by {_amount(diff)}")
    return lines, all(diff <= tolerance for diff, _label in comparisons)


HIDDEN_KEYS_ROWS = "hiddenkeys_per_pair.jsonl"   # hiddenkeys.ROWS_FILE, named here so a zip without it needs no hiddenkeys.py
SPEC_CURVE = "spec_curve.jsonl"


def _kit(name: str):
    """A kit module that ships beside this file, or the error naming it."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        raise FixtureError(f"{name}.py", None, "missing; it ships beside reproduce.py in the bundle zip") from None


def _key_file(folder: str, what: str) -> dict:
    """key.json, or the error saying it cannot be read (`what`: what it holds)."""
    try:
        with open(os.path.join(folder, contract.KEY), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise FixtureError(contract.KEY, None, f"cannot read {what} ({exc})") from None


def _hidden_keys(folder: str, golden: Golden, tolerance: float):
    """Keys made by training and revealed after scoring (hiddenkeys.py): every published value
    and every specification row, recomputed from the per-pair rows and key.json."""
    hiddenkeys = _kit("hiddenkeys")
    key = _key_file(folder, "the keys")
    rows = rankstats.read_jsonl(os.path.join(folder, HIDDEN_KEYS_ROWS))
    try:
        result = hiddenkeys.recompute(rows, key)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise FixtureError(HIDDEN_KEYS_ROWS, None, f"the rows and {contract.KEY} do not fit together ({type(exc).__name__}: {exc})") from None
    curve = result["curve"]
    recomputed = hiddenkeys.golden_blocks(result, key)
    comparisons = []
    for section, value in recomputed.items():
        comparisons += rankstats.compare(golden.data.get(section), value, (section,))
    published = rankstats.read_jsonl(os.path.join(folder, SPEC_CURVE))
    mine = hiddenkeys.spec_rows(curve)
    spec_ok = len(published) == len(mine)
    for k, (theirs, ours) in enumerate(zip(published, mine), start=1):
        for diff, label in rankstats.compare(theirs, ours):
            comparisons.append((diff, f"{SPEC_CURVE}:{k} {label}"))
    worst = max(comparisons)
    kr = result["summary"]["key_recovery"]
    lines = [f"hidden keys: {len(comparisons)} values recomputed from {HIDDEN_KEYS_ROWS} and {contract.KEY} (hiddenkeys.py)",
             f"  valid organisms {kr['valid']} of {kr['organisms']}; key recovery attribution {kr['attribution']['value']:.3f}, "
             f"patching {kr['patching']['value']:.3f}, gap {kr['gap']['value']:+.3f} "
             f"[{kr['gap']['interval'][0]:+.3f}, {kr['gap']['interval'][1]:+.3f}]; order claimed: "
             f"{'yes' if result['order_claimed'] else 'no'}",
             f"  {SPEC_CURVE}: {len(published)} rows, {len(mine)} recomputed",
             f"  largest disagreement {_amount(worst[0])} ({worst[1]})"]
    for diff, label in comparisons:
        if not diff <= tolerance:
            where = label if label.startswith(SPEC_CURVE) else golden.where(*label.split("/"))
            lines.append(f"{where}: {label} disagrees by {_amount(diff)}")
    if not spec_ok:
        lines.append(f"{SPEC_CURVE}: {len(published)} rows, but the curve has {len(mine)}")
    return lines, spec_ok and all(diff <= tolerance for diff, _label in comparisons)


def _key_recovery(folder: str, golden: Golden, attribution: list, patching: list, tolerance: float):
    """A planted key's scorecard (keyrecovery.py), recomputed from the rows and key.json."""
    keyrecovery = _kit("keyrecovery")
    key = _key_file(folder, "the planted key")
    heads_a = _read_rows(folder, contract.HEADS_ATTRIBUTION, rankstats.ATTRIBUTION_FIELDS, ("attribution",),
                         key=("dimension", "pair_id", "component"))
    heads_p = _read_rows(folder, contract.HEADS_PATCHING, rankstats.PATCHING_FIELDS, ("clean_margin", "effect"),
                         key=("dimension", "pair_id", "component", "mode"))
    attribution, patching = attribution + heads_a, patching + heads_p
    recomputed = keyrecovery.recompute(attribution, patching, key)
    lines, comparisons, ok = keyrecovery.check(attribution, patching, key, golden.data["key_recovery"], tolerance,
                                               recomputed)
    for diff, label in comparisons:
        if not diff <= tolerance:
            lines.append(f"{golden.where(*label.split('/'))}: {label} disagrees by {_amount(diff)}")
    spec_file = getattr(keyrecovery, "SPEC_FILE", None)
    if spec_file and os.path.exists(os.path.join(folder, spec_file)):  # the specification curve, row by row
        published = rankstats.read_jsonl(os.path.join(folder, spec_file))
        spec, spec_ok = keyrecovery.check_spec_rows(attribution, patching, key, published, tolerance, recomputed)
        lines.append(f"{spec_file} rows recomputed  {len(spec)}, largest disagreement {_amount(max(spec)[0]) if spec else 'none'}")
        lines += [f"{where}: disagrees by {_amount(diff)}" for diff, where in spec if not diff <= tolerance]
        ok = ok and spec_ok
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    recording = bool(args) and args[0] == "--record"
    if recording:
        args = args[1:]
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python reproduce.py [--record] [BUNDLE_DIR]", file=sys.stderr)
        return 2
    folder = args[0] if args else HERE
    # A terminal that cannot show a character must not crash the check.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        lines, ok = check(folder)
        status, output = (0 if ok else 1), "\n".join(lines) + "\n"
    except FixtureError as exc:
        status, output = 2, f"reproduce.py: {exc}\n"
    except Exception:  # a bug here must not read as "disagrees" (1) or "bad file" (2)
        import traceback
        traceback.print_exc()
        return 3
    if recording:  # a failing check is recorded too: a failed reproduction is shown, never hidden
        sys.stdout.write(_record(folder, status, output))
    elif status == 2:
        sys.stderr.write(output)
    else:
        sys.stdout.write(output)
    return status


def _record(folder: str, status: int, output: str) -> str:
    try:
        out = os.fstat(sys.stdout.fileno())
        skip = (out.st_dev, out.st_ino)  # `--record > record.yaml` inside the folder itself
    except (OSError, ValueError, AttributeError):
        skip = None
    study = os.path.basename(os.path.abspath(folder))
    try:
        study = Golden(folder).data.get("study") or study
    except FixtureError:
        pass
    return record.render(str(study), record.folder_files(folder, skip), status, output)


if __name__ == "__main__":
    sys.exit(main())
