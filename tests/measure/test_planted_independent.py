"""Every headline and every row of the specification grid of the committed planted bundle,
recomputed from its JSONL rows and key.json by a second implementation (numpy and scipy, written
apart from bundle_kit/keyrecovery.py, which wrote them): scores as arrays, the AUC as the
Mann-Whitney U of scipy's average ranks, precision at k by counting the members above the cut
and sharing the cut's ties."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
stats = pytest.importorskip("scipy.stats")

BUNDLE = Path(__file__).resolve().parents[2] / "bundles" / "planted-v2"
FLOORS = (0.0, 0.001, 0.005, 0.01, 0.05)
KEYS = ("circuit", "direct", "single")
AGGREGATIONS = ("site", "magnitude", "signed")
METRICS = ("auc", "precision_at_k")
MODES = ("mean", "zero", "swap")
PRIMARY = {"floor": 0.01, "key": "circuit", "aggregation": "site", "metric": "auc", "mode": "mean"}
TOL = 2e-6   # the JSONL rows hold 8 decimals and golden.json 6


def _lines(path: Path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load(folder: Path = BUNDLE):
    """{dimension: (component names, {method: array pairs x components of value / |margin|})}."""
    cells: dict = {}
    for name in ("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl"):
        for r in _lines(folder / name):
            if r["component"].startswith(("head_", "mlp_")):
                cells.setdefault(r["dimension"], {}).setdefault((r["pair_id"], "attribution", r["component"]),
                                                               r["attribution"] / abs(r["margin"]))
    for name in ("patching_per_pair.jsonl", "heads_patching_per_pair.jsonl"):
        for r in _lines(folder / name):
            if r["component"].startswith(("head_", "mlp_")):
                cells.setdefault(r["dimension"], {}).setdefault((r["pair_id"], r["mode"], r["component"]),
                                                               r["effect"] / abs(r["clean_margin"]))
    out = {}
    for d, cell in cells.items():
        pairs = sorted({p for p, _m, _c in cell})
        comps = sorted({c for _p, _m, c in cell})
        arrays = {m: np.array([[cell[(p, m, c)] for c in comps] for p in pairs])
                  for m in ("attribution", *MODES)}
        out[d] = (comps, arrays)
    return out


def score(values, method: str, aggregation: str, floor: float):
    per_pair = aggregation == "magnitude" or (aggregation == "site" and method != "attribution")
    s = np.abs(values).mean(axis=0) if per_pair else np.abs(values.mean(axis=0))
    return np.where(s >= floor, s, 0.0)


def auc(s, member):
    ranks = stats.rankdata(s)    # average ranks, 1 = smallest
    n1, n0 = member.sum(), (~member).sum()
    return (ranks[member].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


def precision_at_k(s, member):
    k = int(member.sum())
    cut = np.sort(s)[::-1][k - 1]
    above, tied = s > cut, s == cut
    return (member[above].sum() + (k - above.sum()) * member[tied].sum() / tied.sum()) / k


def headline(data, key, method, floor, which, aggregation, metric):
    values, chances = [], []
    for d, (comps, arrays) in sorted(data.items()):
        members = set(key["dimensions"][d]["keys"][which])
        if not members or len(members) == len(comps):
            continue
        member = np.array([c in members for c in comps])
        s = score(arrays[method], method, aggregation, floor)
        values.append(auc(s, member) if metric == "auc" else precision_at_k(s, member))
        chances.append(0.5 if metric == "auc" else member.sum() / len(comps))
    return float(np.mean(values)), float(np.mean(chances))


@pytest.fixture(scope="module")
def bundle():
    if not (BUNDLE / "golden.json").exists():
        pytest.fail(f"{BUNDLE} is not committed")
    key = json.loads((BUNDLE / "key.json").read_text(encoding="utf-8"))
    golden = json.loads((BUNDLE / "golden.json").read_text(encoding="utf-8"))
    return load(), key, golden, _lines(BUNDLE / "spec_curve.jsonl")


def test_every_specification_row_recomputes(bundle):
    data, key, _golden, rows = bundle
    mine = []
    for floor, which, aggregation, metric in itertools.product(FLOORS, KEYS, AGGREGATIONS, METRICS):
        v, c = headline(data, key, "attribution", floor, which, aggregation, metric)
        mine.append(("attribution", floor, which, aggregation, metric, "none", v, c, v > c))
    for floor, which, aggregation, metric, mode in itertools.product(FLOORS, KEYS, AGGREGATIONS, METRICS, MODES):
        v, c = headline(data, key, mode, floor, which, aggregation, metric)
        mine.append(("patching", floor, which, aggregation, metric, mode, v, c, v > c))
    for floor, which, aggregation, metric, mode in itertools.product(FLOORS, KEYS, AGGREGATIONS, METRICS, MODES):
        p, _c = headline(data, key, mode, floor, which, aggregation, metric)
        a, _c = headline(data, key, "attribution", floor, which, aggregation, metric)
        mine.append(("gap", floor, which, aggregation, metric, mode, p - a, 0.0, p - a > 0))
    assert len(rows) == len(mine) == 630
    published = {(r["headline"], r["floor"], r["key"], r["aggregation"], r["metric"], r["mode"]): r for r in rows}
    for h, floor, which, aggregation, metric, mode, value, reference, holds in mine:
        r = published[(h, floor, which, aggregation, metric, mode)]
        assert r["value"] == pytest.approx(value, abs=TOL), r
        assert r["reference"] == pytest.approx(reference, abs=TOL), r
        assert r["holds"] == holds, r


def test_every_headline_recomputes(bundle):
    data, key, golden, rows = bundle
    kr = golden["key_recovery"]
    p = PRIMARY
    attribution, _ = headline(data, key, "attribution", p["floor"], p["key"], p["aggregation"], p["metric"])
    for mode in MODES:
        value, _ = headline(data, key, mode, p["floor"], p["key"], p["aggregation"], p["metric"])
        assert kr["by_method"][f"patching_{mode}"]["value"] == pytest.approx(value, abs=TOL)
        assert kr["gap"][mode]["value"] == pytest.approx(value - attribution, abs=TOL)
    assert kr["headline"]["attribution"]["value"] == pytest.approx(attribution, abs=TOL)
    assert kr["headline"]["patching"]["value"] == kr["by_method"]["patching_mean"]["value"]
    for name in ("attribution", "patching", "gap"):
        mine = [r for r in rows if r["headline"] == name]
        assert kr["spec_curve"][name]["share"] == pytest.approx(sum(r["holds"] for r in mine) / len(mine), abs=TOL)
        assert kr["spec_curve"][name]["specifications"] == len(mine)
    assert kr["headline"]["gap"]["share_patching_ahead"] == kr["spec_curve"]["gap"]["share"]
    for family, values in kr["by_family"].items():
        dims = {d: v for d, v in data.items() if key["dimensions"][d]["family"] == family}
        got, _ = headline(dims, key, "attribution", p["floor"], p["key"], p["aggregation"], p["metric"])
        assert values["attribution"] == pytest.approx(got, abs=TOL)


def test_every_trap_recomputes(bundle):
    data, key, golden, _rows = bundle
    traps = golden["key_recovery"]["traps"]
    groups = {"backup": ("roles", {"backup"}), "fallback": ("roles", {"primary", "fallback_detector", "fallback_scorer"}),
              "offdist_gate": ("distractors", {"offdist_gate"}), "upstream": ("roles", {"early_compute", "relay"}),
              "mover": ("roles", {"mover"}), "decoy": ("distractors", {"decoy", "canceller"})}
    for trap, (where, roles) in groups.items():
        for method in ("attribution", *MODES):
            inclusions = []
            for d, (comps, arrays) in sorted(data.items()):
                spec = key["dimensions"][d]
                k = len(spec["keys"]["circuit"])
                s = score(arrays[method], method, PRIMARY["aggregation"], PRIMARY["floor"])
                cut = np.sort(s)[::-1][k - 1]
                above, tied = (s > cut).sum(), (s == cut).sum()
                for c, info in spec[where].items():
                    if info["role"] in roles:
                        v = s[comps.index(c)]
                        inclusions.append(1.0 if v > cut else (k - above) / tied if v == cut else 0.0)
            name = "attribution" if method == "attribution" else f"patching_{method}"
            assert traps[trap][name] == pytest.approx(float(np.mean(inclusions)), abs=TOL), (trap, name)
