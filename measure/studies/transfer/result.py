"""The transfer study's analysis, fixed before unblinding (docs/transfer.md): key recovery of
each organism's key on the real trunk by the routed study's primary specification, its
specification curve over the mean-mode choices, the null control (bundle_kit/hiddenkeys.py
`recompute`), and the equivalence test of the real trunk's gap against the routed organisms'
(`hiddenkeys.equivalence`).
"""
from __future__ import annotations

from bundle_kit import hiddenkeys, rankstats
from measure.errors import MeasureError
from measure.runner.jsonio import read_json
from measure.studies.transfer.study import MODELS, ROOT, SCORES, score_digests

BOUND = 0.06        # registrations/transfer-equivalence.yaml: the smallest bound with 80% power (power.py)
REFERENCE = ROOT / "bundles" / "routed" / "golden.json"


def reference_gaps(path=REFERENCE) -> list[float]:
    """The routed study's per-organism gaps (primary specification) over its valid organisms."""
    return [o["gap"] for _name, o in sorted(read_json(path, "routed golden.json")["organisms"].items()) if o["valid"]]


def key_doc(record: dict) -> dict:
    """key.json of the transfer bundle: the unblinding record with each organism's dimensions,
    and the routed gaps the equivalence test compares with."""
    organisms = {}
    for name, o in sorted(record["organisms"].items()):
        tag = f"s{int(name.removeprefix('seed-')):02d}"
        organisms[name] = {"keyed": o["keyed"], "keyed_dimension": f"{tag}-{o['keyed']}",
                           "null_dimension": f"{tag}-null", "key": o["key"], "decoys": o["decoys"],
                           "valid": o["valid"], "host_margin": o["host_margin"], "check": o["check"]}
    return {"construction": ("made by training: per organism, one attention head of layers 4 and 5 of the "
                             "real-preferences model, drawn from a salt committed as its sha256 before training, "
                             "was the only part trained on the planted rule (measure/studies/transfer/plant.py); "
                             "valid when the rule was learnt (margin at least 1) and resampling the head, a check "
                             "neither scored method uses, removed at least 0.9 of it"),
            "salt": record["salt"], "unblinded_at": record["unblinded_at"], "scores_fixed_at": record["scores_fixed_at"],
            "reference": {"study": "routed", "file": "bundles/routed/golden.json", "bound": BOUND,
                          "gaps": reference_gaps()},
            "organisms": organisms}


def blind_rows(names) -> tuple[list[dict], list[dict]]:
    """(attribution rows, patching rows) of the organisms `names`' blind scores."""
    attribution, patching = [], []
    for name in names:
        for r in rankstats.read_jsonl(SCORES / f"{name}.jsonl"):
            (attribution if r.pop("kind") == "attribution" else patching).append(r)
    return attribution, patching


def compute(record: dict | None = None) -> dict:
    """`hiddenkeys.recompute` on the real trunk plus "transfer" (the equivalence test), from the
    blind scores (checked against the committed digest) and the unblinding record."""
    record = record or read_json(MODELS / "unblinded.json", "transfer unblinding record")
    if score_digests() != read_json(MODELS / "blind-scores.json", "transfer blind scores"):
        raise MeasureError(f"{SCORES}: missing or not the scores blind-scores.json fixed; run measure")
    key = key_doc(record)
    wide = hiddenkeys.wide_rows(*blind_rows(key["organisms"]), modes=("mean",))
    result = hiddenkeys.recompute(wide, key)
    result["transfer"] = hiddenkeys.transfer(result, key)
    return {**result, "rows": wide, "key": key}


def print_result(result: dict) -> None:
    """The headline figures, one line each."""
    kr, null, t = result["summary"]["key_recovery"], result["summary"]["null"], result["transfer"]
    print(f"organisms {kr['organisms']}, valid {kr['valid']}; validity/failed {result['summary']['validity']['failed']}")
    for k in ("attribution", "patching", "gap"):
        lo, hi = kr[k]["interval"]
        print(f"{k:<12} {kr[k]['value']:+.3f} [{lo:+.3f}, {hi:+.3f}]  share agreeing "
              f"{result['curve']['share_agreeing'][k]:.2f} of {result['curve']['specifications']}")
    print(f"null: attribution {null['attribution']:.3f}, patching {null['patching']:.3f}, worst "
          f"{null['worst_distance']['value']:.3f}; key on null: attribution {null['key_on_null']['attribution']:.3f}, "
          f"patching {null['key_on_null']['patching']:.3f}")
    print(f"transfer: real gap {t['gap']:+.3f} - routed gap {t['reference_gap']:+.3f} = {t['difference']:+.3f} "
          f"[{t['interval'][0]:+.3f}, {t['interval'][1]:+.3f}], bound {t['bound']}: {t['verdict']}")


def main() -> int:
    """`python -m measure.studies.transfer.result`: print the figures; exit status 2 on an error."""
    import sys
    try:
        print_result(compute())
    except MeasureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
