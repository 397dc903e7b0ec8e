"""Key validation of a routed organism, by neither scored method: per-side resample ablation
(measure/instruments/resample.py) on held-out twins of each rule.

With m the mean clean margin of the rule's twins:
- necessity: 1 - (mean margin with the key resampled) / m, at least 0.9;
- sufficiency: (mean margin with every head and MLP outside the key resampled) / m, at least 0.9;
- leak: the largest |mean margin with one outside component resampled - m| / m, under 0.1.
A rule that fails any of the three makes its organism void. Each key member's own share
(1 - mean margin with it alone resampled / m) is reported, not judged.
"""
from __future__ import annotations

import random

from measure.instruments.resample import per_side_sources, resampled_rewards
from measure.studies.routed.keys import NULL_RULE, RULES, universe

NECESSITY, SUFFICIENCY, LEAK = 0.9, 0.9, 0.1


def _margins(rewards) -> list[float]:
    r = rewards.double().tolist()
    return [r[i] - r[i + 1] for i in range(0, len(r), 2)]


def _mean(xs) -> float:
    return sum(xs) / len(xs)


def validate(adapter, twins: list[dict], keys: dict[str, list[str]], seed: int, keyed=RULES) -> dict:
    """The three checks of every keyed rule, the null rule's clean margins, and `valid` for the organism."""
    comps = universe(adapter.n_layers, adapter.n_heads)
    sides = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"])) for t in twins]
    sources = per_side_sources(twins, [len(c) for c, _r in sides], random.Random(f"routed/check/{seed}"))
    out = {}
    for rule in (*keyed, NULL_RULE):
        rows = [p for p, t in enumerate(twins) if t["dimension"] == rule]
        main = [s for p in rows for s in sides[p]]
        src = [sides[q][side] for p in rows for q, side in sources[p]]
        batch, src_run = adapter.batch(main), adapter.clean_run(adapter.batch(src))
        m = _mean(_margins(adapter.clean_run(batch).reward))
        if rule == NULL_RULE:
            out[rule] = {"n": len(rows), "clean_margin": m}
            continue

        def resampled(patched) -> float:
            return _mean(_margins(resampled_rewards(adapter, batch, src_run, set(patched))))

        key = keys[rule]
        outside = [c for c in comps if c not in key]
        necessity = 1 - resampled(key) / m
        sufficiency = resampled(outside) / m
        singles = {c: abs(resampled([c]) - m) / abs(m) for c in outside}
        worst = max(singles, key=singles.get)
        out[rule] = {"n": len(rows), "clean_margin": m, "key": key,
                     "necessity": necessity, "sufficiency": sufficiency,
                     "leak": singles[worst], "leak_component": worst,
                     "member_share": {c: 1 - resampled([c]) / m for c in key},
                     "passes": necessity >= NECESSITY and sufficiency >= SUFFICIENCY and singles[worst] < LEAK}
    out["valid"] = all(out[r]["passes"] for r in keyed)
    return out
