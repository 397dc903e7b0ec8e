"""The key check: resample ablation with a different source on each side of a pair.

Neither scored method uses it; the resampling (measure/instruments/resample.py) gives each side
of a pair its own source, another held-out response of the same length.

What the margin should then be is computed from the design, not measured: the rule's mechanism
is simulated (`circuits.simulate`) with the resampled members behaving as on their source, and
everything the rule does not own keeps what it did on the pair (for a subset of the rule's
mechanism) or takes what it did on the source (for the complement of the key). The deviation of
a check is mean |patched margin - designed margin| / |rule weight| over the held-out twins.

Checks per (organism, rule):
- necessity: the key resampled; the rule's part of the margin must follow the sources;
- sufficiency: every head and MLP outside the key resampled; the rule's part must stay;
- every single member of the mechanism (key and distractors) and every pair of them resampled:
  the joint behaviour of backups, fallbacks, gates and cancellers, as designed.
"""
from __future__ import annotations

import itertools
import random

from measure.instruments.resample import per_side_sources, resampled_rewards
from measure.studies.planted import circuits
from measure.studies.planted import data as pdata
from measure.studies.planted.design import N_VAL, component, dimension_name, mechanism_of

TOLERANCE = 0.1


def checks_of(mech: circuits.Mechanism) -> dict[str, tuple]:
    """name -> (resampled member names, case): the key ("subset"), the complement of the key
    ("complement"), and every single member and pair of members of the mechanism."""
    names = [m.name for m in mech.members]
    key = tuple(m.name for m in mech.members if m.key)
    out = {"necessity": (key, "subset"), "sufficiency": (key, "complement")}
    for k in (1, 2):
        for subset in itertools.combinations(names, k):
            out["resample " + "+".join(subset)] = (subset, "subset")
    return out


def _value_mean(d: dict, prompt: str, response: str) -> list[float]:
    """The filler values averaged over every position of `<bos> prompt <sep> response <eos>`:
    what a background head reads at the scoring token (it attends uniformly)."""
    words = ["<bos>", *prompt.split(), "<sep>", *response.split(), "<eos>"]
    total = [0.0] * N_VAL
    for word in words:
        for k, x in enumerate(d["word_values"].get(word, ())):
            total[k] += x
    return [t / len(words) for t in total]


def designed_reward(d: dict, own: tuple, source: tuple, resampled: set, claim: tuple | None = None) -> float:
    """The reward the design says the organism pays on `own` (prompt, response) when the
    `resampled` components take their outputs from a clean run on `source`.

    Every rule's mechanism is simulated with its members that sit in a resampled component
    behaving as on the source; background writes (head vectors, MLP units reading the averaged
    values, the topic head's own push) come from whichever input their component ran on.
    `claim = (rule, bit)` replaces that rule's simulated mechanism by what the key claims:
    the rule pays its weight times `bit` (the source's bit when the key is resampled, the
    pair's own bit when everything else is)."""
    v_own, v_src = _value_mean(d, *own), _value_mean(d, *source)
    f_own, f_src = pdata.features(own[1]), pdata.features(source[1])
    total = 0.0
    for rule in d["rules"]:
        mech = mechanism_of(d, rule)
        states = {}
        for m in mech.members:
            comp = component(d["placement"][rule][m.name])
            states[m.name] = ("source", f_src[rule]) if comp in resampled else ("live", f_own[rule])
        if claim is not None and claim[0] == rule:
            total += pdata.WEIGHTS[rule] * claim[1]
        else:
            total += circuits.simulate(mech, pdata.WEIGHTS[rule], states)
        if d["rules"][rule] == "offdist":
            comp = component(d["placement"][rule]["topic_gate"])
            topic = (source if comp in resampled else own)[0].split()[-1]
            total += d["params"][rule]["topic_push"] * d["topic_sign"][topic]
    layer0 = sorted(c for c in d["background_heads"] if c.startswith("head_L0_"))
    mix = [0.0] * N_VAL
    for c in layer0:
        v = v_src if c in resampled else v_own
        mix = [m + x / len(layer0) for m, x in zip(mix, v)]
    for c, spec in d["background_heads"].items():
        v = v_src if c in resampled else v_own
        total += sum(a * x for a, x in zip(spec["vector"], v))
    for c, spec in d["background_mlps"].items():
        v = v_src if c in resampled else mix
        total += sum(a * x for a, x in zip(spec["vector"], v))
    return total


def verify(adapter, twins: list[dict], key: dict, d: dict, rules=None, checks=None) -> dict:
    """Every check of every rule of one organism; deviations as fractions of the rule's weight.
    `rules` and `checks` (check names) restrict it to some (the tests use them to stay quick)."""
    universe = [c for c in adapter.components() if c.startswith(("head_", "mlp_"))]
    sides = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"])) for t in twins]
    texts = [((t["prompt"], t["chosen"]), (t["prompt"], t["rejected"])) for t in twins]
    rng = random.Random(f"planted/v2/verify/{d['family']}/{d['seed']}")
    sources = per_side_sources(twins, [len(c) for c, _r in sides], rng)
    out = {}
    for rule in rules or d["rules"]:
        mech = mechanism_of(d, rule)
        w = pdata.WEIGHTS[rule]
        names = {m.name: component(d["placement"][rule][m.name]) for m in mech.members}
        key_components = set(key["dimensions"][dimension_name(d["family"], d["seed"], rule)]["components"])
        rows = [p for p, t in enumerate(twins) if t["dimension"] == rule]
        main, src, own_in, src_in = [], [], [], []
        for p in rows:
            main += [sides[p][0], sides[p][1]]
            own_in += [texts[p][0], texts[p][1]]
            for q, side in sources[p]:
                src.append(sides[q][side])
                src_in.append(texts[q][side])
        batch, src_batch = adapter.batch(main), adapter.batch(src)
        src_run = adapter.clean_run(src_batch)
        clean = adapter.clean_run(batch).reward.double().tolist()
        designed_clean = [designed_reward(d, own_in[n], src_in[n], set()) for n in range(len(main))]
        results = {"clean": {"resampled": [], "mean_deviation": _mean_dev(clean, designed_clean, w),
                             "max_deviation": _max_dev(clean, designed_clean, w)}}
        for check, (members, case) in checks_of(mech).items():
            if checks is not None and check not in checks:
                continue
            if check == "necessity":    # the key as key.json states it, not as the design would
                patched = set(key_components)
            elif case == "complement":
                patched = set(universe) - key_components
            else:
                patched = {names[m] for m in members}
            got = resampled_rewards(adapter, batch, src_run, patched).double().tolist()
            designed = [designed_reward(d, own_in[n], src_in[n], patched, _claim(rule, check, own_in[n], src_in[n]))
                        for n in range(len(main))]
            results[check] = {"resampled": sorted(patched) if case != "complement"
                              else f"{len(patched)} components outside the key",
                              "mean_deviation": _mean_dev(got, designed, w), "max_deviation": _max_dev(got, designed, w)}
        bits = [pdata.features(s[1])[rule] for s in src_in]
        out[rule] = {"n": len(rows), "mechanism": mech.name, "sources_with_word": sum(bits) / len(bits),
                     "checks": results, "worst": max(r["mean_deviation"] for r in results.values()),
                     "passes": all(r["mean_deviation"] <= TOLERANCE for r in results.values())}
    return out


def _claim(rule: str, check: str, own: tuple, source: tuple) -> tuple | None:
    """What the key claims the rule pays: the source's bit with the key resampled (necessity),
    the pair's own bit with everything else resampled (sufficiency); None for the trap checks,
    whose designed margin is the mechanism's simulation."""
    if check == "necessity":
        return (rule, pdata.features(source[1])[rule])
    if check == "sufficiency":
        return (rule, pdata.features(own[1])[rule])
    return None


def _margin_devs(got: list, designed: list, w: float) -> list[float]:
    return [abs((got[i] - got[i + 1]) - (designed[i] - designed[i + 1])) / abs(w) for i in range(0, len(got), 2)]


def _mean_dev(got, designed, w):
    devs = _margin_devs(got, designed, w)
    return sum(devs) / len(devs)


def _max_dev(got, designed, w):
    return max(_margin_devs(got, designed, w))


def verify_all(organisms, root=None) -> dict:
    """The key check of every organism: `key_check` of golden.json."""
    import json

    from measure.models.adapter import load
    from measure.runner.jsonio import read_jsonl
    from measure.studies.planted.design import design
    from measure.studies.planted.organisms import ANSWER_KEY, PLANTED_DIR, VERIFY_PER_RULE, ensure_built

    per = {}
    for family, seed in organisms:
        folder = ensure_built(family, seed, root or PLANTED_DIR)
        adapter = load(str(folder))
        key = json.loads((folder / ANSWER_KEY).read_text(encoding="utf-8"))
        per[key["organism"]] = verify(adapter, read_jsonl(folder / "verify_twins.jsonl"), key, design(family, seed))
    checks = [(org, rule, name, c) for org, rules in per.items() for rule, r in rules.items()
              for name, c in r["checks"].items()]
    worst = max(checks, key=lambda x: x[3]["mean_deviation"])
    return {"method": "per-side resample ablation against the design (measure/studies/planted/verify.py): a "
                      "resampled component takes its outputs, at every position, from a clean run on another "
                      "held-out response of the same length, a different one for each side of the pair",
            "tolerance": TOLERANCE, "twins_per_rule": VERIFY_PER_RULE,
            "checks": len(checks), "worst_deviation": worst[3]["mean_deviation"],
            "worst_check": f"{worst[0]} {worst[1]}: {worst[2]}",
            "all_pass": all(c["mean_deviation"] <= TOLERANCE for *_x, c in checks),
            "by_dimension": {f"{org}-{rule}": {"necessity": r["checks"]["necessity"]["mean_deviation"],
                                               "sufficiency": r["checks"]["sufficiency"]["mean_deviation"],
                                               "traps": max(c["mean_deviation"] for n, c in r["checks"].items()
                                                            if n.startswith("resample ")),
                                               "sources_with_word": r["sources_with_word"]}
                             for org, rules in per.items() for rule, r in rules.items()},
            "per_organism": per}   # written to key_check.json, not to golden.json
