"""The transfer study's analysis, fixed before unblinding (docs/transfer.md): key recovery of
each organism's key on the real trunk by the routed study's primary specification
(bundle_kit/hiddenkeys.py), its specification curve over the mean-mode choices, the null
control, and the equivalence test of the real trunk's gap against the routed organisms'.
"""
from __future__ import annotations

from bundle_kit import hiddenkeys, rankstats
from measure.errors import MeasureError
from measure.runner.jsonio import read_json
from measure.studies.transfer.study import MODELS, ROOT, SCORES, score_digests

BOUND = 0.06        # registrations/transfer-equivalence.yaml: the smallest bound with 80% power (power.py)
REFERENCE = ROOT / "bundles" / "routed" / "golden.json"


def specifications() -> list[dict]:
    """The routed grid's specifications in the one patching mode measured here (mean)."""
    return [s for s in hiddenkeys.specifications() if s["mode"] == "mean"]


def rows(name: str) -> tuple[list[dict], list[dict]]:
    """(attribution rows, patching rows) of organism `name`'s blind scores."""
    every = rankstats.read_jsonl(SCORES / f"{name}.jsonl")
    return [r for r in every if r["kind"] == "attribution"], [r for r in every if r["kind"] == "patching"]


def reference_gaps(path=REFERENCE) -> list[float]:
    """The routed study's per-organism gaps (primary specification) over its valid organisms."""
    return [o["gap"] for o in read_json(path, "routed golden.json")["organisms"].values() if o["valid"]]


def compute() -> dict:
    """Everything the registrations read, from the blind scores and the unblinding record."""
    record = read_json(MODELS / "unblinded.json", "transfer unblinding record")
    if score_digests() != read_json(MODELS / "blind-scores.json", "transfer blind scores"):
        raise MeasureError(f"{SCORES}: missing or not the scores blind-scores.json fixed; run measure")
    by_spec = {}
    data = {name: rows(name) for name in record["organisms"]}
    for spec in specifications():
        by_spec[hiddenkeys.spec_name(spec)] = {
            name: hiddenkeys.organism(*data[name], f"s{int(name[5:]):02d}-{o['keyed']}", f"s{int(name[5:]):02d}-null",
                                      o["key"], o["decoys"], spec)
            for name, o in record["organisms"].items()}
    valid = {name: o["valid"] for name, o in record["organisms"].items()}
    primary = by_spec[hiddenkeys.spec_name(hiddenkeys.PRIMARY)]
    summary = hiddenkeys.summary(primary, valid)
    curve = hiddenkeys.spec_curve(by_spec, valid)
    gaps = [primary[n]["gap"] for n in sorted(primary) if valid[n]]
    transfer = hiddenkeys.equivalence(gaps, reference_gaps(), BOUND)
    transfer["inside"] = int(transfer["verdict"] == "transfers")
    return {"summary": summary, "curve": curve, "organisms": primary, "transfer": transfer,
            "by_rule": hiddenkeys.by_rule(primary, valid, {n: o["keyed"] for n, o in record["organisms"].items()}),
            "order_claimed": hiddenkeys.order_claimed(summary, curve)}


def print_result(result: dict) -> None:
    kr, null, t = result["summary"]["key_recovery"], result["summary"]["null"], result["transfer"]
    print(f"organisms {kr['organisms']}, valid {kr['valid']}; validity/failed {result['summary']['validity']['failed']}")
    for k in ("attribution", "patching", "gap"):
        lo, hi = kr[k]["interval"]
        print(f"{k:<12} {kr[k]['value']:+.3f} [{lo:+.3f}, {hi:+.3f}]  share agreeing "
              f"{result['curve']['share_agreeing'][k]:.2f} of {result['curve']['specifications']}")
    print(f"null: attribution {null['attribution']:.3f}, patching {null['patching']:.3f}, worst {null['worst_distance']['value']:.3f}; "
          f"key on null: attribution {null['key_on_null']['attribution']:.3f}, patching {null['key_on_null']['patching']:.3f}")
    print(f"transfer: real gap {t['gap']:+.3f} - routed gap {t['reference_gap']:+.3f} = {t['difference']:+.3f} "
          f"[{t['interval'][0]:+.3f}, {t['interval'][1]:+.3f}], bound {t['bound']}: {t['verdict']}")
