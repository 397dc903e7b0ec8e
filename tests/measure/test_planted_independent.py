"""Every headline and every row of the specification grid of the committed planted bundle,
recomputed from its JSONL rows and key.json by a second implementation (numpy and scipy, written
apart from bundle_kit/keyrecovery.py, which wrote them, and importing neither it nor measure/):
scores as arrays, the AUC as the Mann-Whitney U of scipy's average ranks, precision at k by
counting the members above the cut and sharing the cut's ties. Also the background beside the
minor carriers, each registered quantity at the primary specification, and, to show the check
can fail, a bundle with one perturbed row."""
from __future__ import annotations

import itertools
import json
import shutil
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


def grid(data, key, floors=FLOORS, keys=KEYS, aggregations=AGGREGATIONS, metrics=METRICS, modes=MODES):
    """(headline, floor, key, aggregation, metric, mode, value, reference, holds) for every
    specification of the given axes, as spec_curve.jsonl lists them."""
    mine, known = [], {}
    for floor, which, aggregation, metric in itertools.product(floors, keys, aggregations, metrics):
        v, c = known[("attribution", floor, which, aggregation, metric)] = headline(
            data, key, "attribution", floor, which, aggregation, metric)
        mine.append(("attribution", floor, which, aggregation, metric, "none", v, c, v > c))
    for floor, which, aggregation, metric, mode in itertools.product(floors, keys, aggregations, metrics, modes):
        v, c = known[(mode, floor, which, aggregation, metric)] = headline(data, key, mode, floor, which, aggregation, metric)
        mine.append(("patching", floor, which, aggregation, metric, mode, v, c, v > c))
    for floor, which, aggregation, metric, mode in itertools.product(floors, keys, aggregations, metrics, modes):
        p, a = known[(mode, floor, which, aggregation, metric)][0], known[("attribution", floor, which, aggregation, metric)][0]
        mine.append(("gap", floor, which, aggregation, metric, mode, p - a, 0.0, p - a > 0))
    return mine


def mismatches(mine, rows) -> list:
    """The published rows that disagree with the recomputed ones (value, reference or holds)."""
    published = {(r["headline"], r["floor"], r["key"], r["aggregation"], r["metric"], r["mode"]): r for r in rows}
    bad = []
    for h, floor, which, aggregation, metric, mode, value, reference, holds in mine:
        r = published[(h, floor, which, aggregation, metric, mode)]
        if abs(r["value"] - value) > TOL or abs(r["reference"] - reference) > TOL or r["holds"] != holds:
            bad.append((r, value))
    return bad


def _primary_grid(data, key):
    p = PRIMARY
    return grid(data, key, (p["floor"],), (p["key"],), (p["aggregation"],), (p["metric"],), (p["mode"],))


def test_every_specification_row_recomputes(bundle):
    data, key, golden, rows = bundle
    mine = grid(data, key)
    assert len(rows) == len(mine) == 630
    assert mismatches(mine, rows) == []
    # the grid and the primary specification are the registered ones (registrations/planted-v2-gap.yaml)
    kr = golden["key_recovery"]
    assert kr["primary"] == PRIMARY
    assert kr["grid"] == {"floor": list(FLOORS), "key": list(KEYS), "aggregation": list(AGGREGATIONS),
                          "metric": list(METRICS), "mode": list(MODES)}
    flagged = {(r["headline"], r["mode"]) for r in rows if r["primary"]}
    assert flagged == {("attribution", "none"), ("patching", "mean"), ("gap", "mean")}
    for r in rows:
        if r["primary"]:
            assert all(r[a] == PRIMARY[a] for a in ("floor", "key", "aggregation", "metric")), r


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


def test_every_registered_quantity_is_the_primary_specification(bundle):
    """Each planted-v2 registration's quantity, read from golden.json as the build reads it for
    the verdict, equals this file's value at the primary specification (the headlines, the traps)
    or over the grid (the shares): no verdict is computed on another specification."""
    import yaml
    data, key, golden, rows = bundle
    p = PRIMARY
    mine = {f"key_recovery/headline/{name}/share": sum(r["holds"] for r in rows if r["headline"] == name)
            / sum(1 for r in rows if r["headline"] == name) for name in ("attribution", "patching")}
    gap_rows = [r for r in rows if r["headline"] == "gap"]
    mine["key_recovery/headline/gap/share_patching_ahead"] = sum(r["value"] > 0 for r in gap_rows) / len(gap_rows)
    attribution, _ = headline(data, key, "attribution", p["floor"], p["key"], p["aggregation"], p["metric"])
    patching, _ = headline(data, key, p["mode"], p["floor"], p["key"], p["aggregation"], p["metric"])
    mine["key_recovery/headline/attribution/value"] = attribution
    mine["key_recovery/headline/patching/value"] = patching
    mine["key_recovery/headline/gap/value"] = patching - attribution
    records = sorted((BUNDLE.parents[1] / "registrations").glob("planted-v2-*.yaml"))
    assert len(records) == 12
    for record in records:
        quantity = yaml.safe_load(record.read_text(encoding="utf-8"))["quantity"]
        node = golden
        for part in quantity.split("/"):
            node = node[part]
        if quantity.startswith("key_recovery/traps/"):
            continue   # recomputed at the primary specification by test_every_trap_recomputes
        assert node == pytest.approx(mine[quantity], abs=TOL), (record.name, quantity)


def _nearest_rank_bounds(values, q):
    return float(np.quantile(values, q, method="lower")), float(np.quantile(values, q, method="higher"))


def test_the_background_beside_the_minor_carriers_recomputes(bundle):
    """Both distributions the page shows (per-pair magnitude, no floor): every component outside a
    rule's circuit key, and per rule its weakest carrier (smallest |Shapley value|); the share of
    the background at or above the carriers' median, and that it overlaps them."""
    data, key, golden, _rows = bundle
    block = golden["key_recovery"]["background"]
    for method in ("attribution", "mean"):
        background, minor = [], []
        for d, (comps, arrays) in sorted(data.items()):
            spec = key["dimensions"][d]
            s = np.abs(arrays[method]).mean(axis=0)
            members = set(spec["keys"]["circuit"])
            background += [v for c, v in zip(comps, s) if c not in members]
            carriers = sorted((abs(info["shapley"]), c) for c, info in spec["roles"].items() if info["role"] == "carrier")
            if carriers:
                minor.append(s[comps.index(carriers[0][1])])
        published = block["attribution" if method == "attribution" else "patching_mean"]
        for name, values in (("background", np.array(background)), ("minor_carriers", np.array(minor))):
            got = published[name]
            assert got["n"] == len(values)
            assert got["max"] == pytest.approx(values.max(), abs=TOL)
            for label, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9)):
                lo, hi = _nearest_rank_bounds(values, q)
                assert lo - TOL <= got[label] <= hi + TOL, (method, name, label)
        share = float(np.mean(np.array(background) >= np.median(minor) - TOL))
        assert published["share_above_minor_carrier_median"] == pytest.approx(share, abs=0.002)
    overlap = golden["key_recovery"]["overlap"]
    assert overlap["share"] == block["patching_mean"]["share_above_minor_carrier_median"]
    assert overlap["holds"] == (overlap["share"] >= overlap["minimum"])
    # the distributions overlap, in the background's upper tail: its largest effects exceed every minor carrier's
    assert block["patching_mean"]["background"]["max"] > block["patching_mean"]["minor_carriers"]["max"]
    assert overlap["holds"]


def test_the_recomputation_fails_on_a_perturbed_row(bundle, tmp_path):
    """The checks above can fail: one per-pair row changed (a non-key MLP's mean-mode effect on
    one pair made five times the pair's margin) moves the primary rows off the published ones, and so does
    one published row of the curve changed."""
    data, key, _golden, rows = bundle
    assert mismatches(_primary_grid(data, key), rows) == []
    for name in ("attribution_per_pair.jsonl", "heads_attribution_per_pair.jsonl",
                 "heads_patching_per_pair.jsonl", "key.json"):
        shutil.copy(BUNDLE / name, tmp_path / name)
    lines = (BUNDLE / "patching_per_pair.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    for i, line in enumerate(lines):
        r = json.loads(line)
        spec = key["dimensions"][r["dimension"]]
        if (r["mode"] == "mean" and r["component"].startswith("mlp_") and r["component"] not in spec["keys"]["circuit"]
                and r["component"] not in spec.get("distractors", {})):
            r["effect"] = 5 * abs(r["clean_margin"])
            lines[i] = json.dumps(r) + "\n"
            break
    else:
        pytest.fail("no non-key MLP row to perturb")
    (tmp_path / "patching_per_pair.jsonl").write_text("".join(lines), encoding="utf-8")
    bad = mismatches(_primary_grid(load(tmp_path), key), rows)
    assert {(r["headline"], r["mode"]) for r, _v in bad} == {("patching", "mean"), ("gap", "mean")}
    edited = [dict(r, value=r["value"] + 0.001) if r["headline"] == "attribution" and r["primary"] else r for r in rows]
    assert [r["headline"] for r, _v in mismatches(_primary_grid(data, key), edited)] == ["attribution"]
