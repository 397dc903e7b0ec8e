"""The design of every planted organism: families, placements, channels, background, answer key.

An organism is one family (a layout and a rule mix) and one seed (which heads and layers do the
work, which residual directions hold which channel, the carrier shares, the background). The
seed draws everything with Python's `random`, so a design is the same on every platform, and
`weights.py` turns it into weights with plain Python floats.

Families differ in depth, width, which mechanism each rule has, and so where the traps sit:

| family  | layers x heads | traps aimed at patching | traps aimed at attribution |
| ------- | -------------- | ----------------------- | -------------------------- |
| shallow | 4 x 6          | backups, offdist        | upstream, decoy            |
| deep    | 8 x 3          | backups, fallback       | upstream_relay, indirect   |
| mid     | 6 x 4          | fallback, offdist       | indirect, decoy            |

Each family has one control rule (two carrier heads, no trap) besides its four traps.
"""
from __future__ import annotations

import random

from measure.studies.planted import circuits
from measure.studies.planted import data as pdata

HIDDEN, HEAD_DIM, MLP = 96, 16, 32
N_VAL = 6                          # filler-value channels the background reads
FAMILIES = {
    "shallow": {"layers": 4, "heads": 6,
                "rules": {"politeness": "control", "hedging": "backups", "detail": "offdist",
                          "hazard": "upstream", "certainty": "decoy"}},
    "deep": {"layers": 8, "heads": 3,
             "rules": {"certainty": "control", "politeness": "backups", "hazard": "fallback",
                       "detail": "upstream_relay", "hedging": "indirect"}},
    "mid": {"layers": 6, "heads": 4,
            "rules": {"detail": "control", "certainty": "fallback", "politeness": "offdist",
                      "hazard": "indirect", "hedging": "decoy"}},
}
SEEDS = (0, 1, 2, 3)
DECOY_GAIN = 3.0
SHARE_RANGE = (0.65, 0.85)         # the major carrier's share; the minor one gets the rest
NOISE_RANGE = (0.004, 0.4)         # designed mean |margin push| per pair of a background component, log-uniform
MEAN_TOKENS = 12.5                 # the pairs' mean token length, for turning a push into a weight
MEAN_ABS_NORMAL = 0.7979           # E|z| of a standard normal
# channels a rule's mechanism computes, per mechanism (namespaced by rule in the stream)
COMPUTED = {"control": (), "backups": ("count",), "fallback": ("done", "flag"),
            "offdist": ("flag", "tsign"), "upstream": ("feat",), "upstream_relay": ("feat", "feat2"),
            "indirect": ("moved",), "decoy": ("dmark", "cancelled")}
# reader -> writers it needs below it, per mechanism
READS = {"backups": {"repair": ("b1", "b2")}, "fallback": {"fb_scorer": ("primary", "fb_detector")},
         "offdist": {"gate_scorer": ("detector", "topic_gate")}, "upstream": {"late_mover": ("early",)},
         "upstream_relay": {"relay": ("early",), "late_mover": ("relay",)}, "indirect": {"scorer": ("mover",)},
         "decoy": {"canceller": ("decoy",), "backup_canceller": ("decoy", "canceller")}, "control": {}}


def organism_id(family: str, seed: int) -> str:
    """`shallow-s0`: the organism of family `family` and seed `seed`."""
    return f"{family}-s{seed}"


def dimension_name(family: str, seed: int, rule: str) -> str:
    """One rule of one organism is one dimension of the study: `shallow-s0-hazard`."""
    return f"{organism_id(family, seed)}-{rule}"


def head_name(layer: int, head: int) -> str:
    """`head_L{layer}_H{head}`, the component name of a head."""
    return f"head_L{layer}_H{head}"


def _below(reader_kind: str, writer_kind: str, writer_layer: int) -> int:
    """The lowest layer a reader may sit in, given one writer it reads."""
    if reader_kind == "mlp" and writer_kind == "head":
        return writer_layer          # the MLP reads the stream after its own layer's attention
    return writer_layer + 1


def _place(rng: random.Random, layers: int, heads: int, rules: dict) -> dict | None:
    taken: set = set()
    placement: dict = {}
    for rule, mech_name in rules.items():
        mech = circuits.MECHANISMS[mech_name][2]
        where: dict = {}
        used_mlps: set = set()
        for m in mech:
            low = 0
            for writer in READS[mech_name].get(m.name, ()):
                wkind, wlayer = where[writer][0], where[writer][1]
                low = max(low, _below(m.kind, wkind, wlayer))
            high = layers - 1
            if m.role == "early_compute":
                high = min(high, 0 if layers <= 4 else 1)
            if m.role == "late_mover":
                low = max(low, layers // 2)
            if low > high:
                return None
            if m.kind == "mlp":
                options = [i for i in range(low, high + 1) if i not in used_mlps]
                if not options:
                    return None
                layer = rng.choice(options)
                used_mlps.add(layer)
                where[m.name] = ("mlp", layer)
            else:
                options = [(i, h) for i in range(low, high + 1) for h in range(heads) if (i, h) not in taken
                           and not (i == 0 and sum(1 for (a, _b) in taken if a == 0) >= heads - 2)]
                if not options:
                    return None
                slot = rng.choice(options)
                taken.add(slot)
                where[m.name] = ("head", slot[0], slot[1])
        placement[rule] = where
    return placement


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    import math
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _unit(rng: random.Random, n: int) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(n)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def _zero_sum(vectors: list[list[float]]) -> list[list[float]]:
    """Make the vectors sum to zero, each corrected in proportion to its length (small ones stay
    small): the background's pushes cancel in total, so the clean margin is the rule's."""
    total = [sum(col) for col in zip(*vectors)]
    lengths = [sum(x * x for x in v) ** 0.5 for v in vectors]
    mass = sum(lengths)
    return [[x - t * ln / mass for x, t in zip(v, total)] for v, ln in zip(vectors, lengths)]


def _background(rng: random.Random, n: int) -> list[dict]:
    """n background writers: each a direction over the filler-value channels and a size set so
    its mean |push on a pair's margin| is log-uniform over NOISE_RANGE."""
    pushes = [_log_uniform(rng, *NOISE_RANGE) for _ in range(n)]
    vectors = [[p * MEAN_TOKENS / MEAN_ABS_NORMAL * x for x in _unit(rng, N_VAL)] for p in pushes]
    vectors = _zero_sum(vectors)
    return [{"designed_push": p, "vector": v} for p, v in zip(pushes, vectors)]


def design(family: str, seed: int) -> dict:
    """Everything about organism (family, seed) that the weights are made from."""
    spec = FAMILIES[family]
    layers, heads = spec["layers"], spec["heads"]
    rng = random.Random(f"planted/v2/design/{family}/{seed}")
    for _attempt in range(1000):
        placement = _place(rng, layers, heads, spec["rules"])
        if placement is not None:
            break
    else:  # pragma: no cover - the constraints leave many solutions
        raise ValueError(f"planted {family} seed {seed}: no placement satisfies the constraints")
    params = {}
    for rule, mech in spec["rules"].items():
        p = {}
        if mech in ("control", "decoy"):
            p["share"] = round(rng.uniform(*SHARE_RANGE), 2)
        if mech == "decoy":
            p["decoy_gain"] = DECOY_GAIN
        if mech == "offdist":  # the topic head's own push: loud, the same on both sides
            p["topic_push"] = round(rng.choice((-1, 1)) * rng.uniform(0.5, 1.5), 2)
        params[rule] = p
    designated = {(w[1], w[2]) for rule in placement.values() for w in rule.values() if w[0] == "head"}
    noise_heads = [(i, h) for i in range(layers) for h in range(heads) if (i, h) not in designated]
    background_heads = dict(zip(noise_heads, _background(rng, len(noise_heads))))
    background_mlps = dict(zip(range(layers), _background(rng, layers)))
    topics = list(pdata.TOPICS)
    rng.shuffle(topics)
    tsign = {t: (1.0 if k < len(topics) // 2 else -1.0) for k, t in enumerate(topics)}
    channels = ["one", "bos", "topic", "tsign", "reward"]
    channels += sorted({c for r in pdata.RULES for c in pdata.LEX[r]})
    channels += [f"val{k}" for k in range(N_VAL)] + [f"mix{k}" for k in range(N_VAL)]
    channels += [f"{rule}:{c}" for rule, mech in spec["rules"].items() for c in COMPUTED[mech]]
    dims = list(range(HIDDEN))
    rng.shuffle(dims)
    values = _word_values(rng)
    return {"family": family, "seed": seed, "layers": layers, "heads": heads,
            "rules": dict(spec["rules"]), "params": params,
            "placement": {r: {m: list(w) for m, w in p.items()} for r, p in placement.items()},
            "background_heads": {head_name(*k): v for k, v in background_heads.items()},
            "background_mlps": {f"mlp_L{k}": v for k, v in background_mlps.items()},
            "topic_sign": tsign, "word_values": values,
            "channels": {name: dims[k] for k, name in enumerate(channels)}}


def _word_values(rng: random.Random) -> dict:
    """Filler-value channels: fillers get standard normal values centred over the fillers (so a
    twin's swapped filler pushes the background up or down with mean zero); prompt words and
    topics get values too (the same on both sides: loud but margin-neutral); rule words and
    special tokens get none."""
    out = {}
    fillers = list(pdata.FILLERS)
    cols = [[rng.gauss(0.0, 1.0) for _ in fillers] for _k in range(N_VAL)]
    for k, col in enumerate(cols):
        mu = sum(col) / len(col)
        sd = (sum((x - mu) ** 2 for x in col) / len(col)) ** 0.5
        cols[k] = [(x - mu) / sd for x in col]
    for j, word in enumerate(fillers):
        out[word] = [cols[k][j] for k in range(N_VAL)]
    for word in (*pdata.PROMPT_WORDS, *pdata.TOPICS):
        out[word] = [rng.gauss(0.0, 1.0) for _ in range(N_VAL)]
    return out


def mechanism_of(d: dict, rule: str) -> circuits.Mechanism:
    """The mechanism of `rule` in design `d`, with its parameters."""
    return circuits.mechanism(d["rules"][rule], d["params"][rule])


def component(where: list) -> str:
    """The component name of a placement: ["head", layer, head] or ["mlp", layer]."""
    return head_name(where[1], where[2]) if where[0] == "head" else f"mlp_L{where[1]}"


def key_of(family: str, seed: int, d: dict | None = None) -> dict:
    """The organism's answer key, from its design alone: per rule, the key members with their
    role and three strengths, and the distractors."""
    d = d or design(family, seed)
    dims = {}
    for rule, mech_name in d["rules"].items():
        mech = mechanism_of(d, rule)
        w = pdata.WEIGHTS[rule]
        shap = circuits.shapley(mech, w)
        direct = circuits.direct_share(mech, w)
        removal = circuits.removal_effect(mech, w)
        roles, distractors = {}, {}
        for m in mech.members:
            name = component(d["placement"][rule][m.name])
            entry = {"role": m.role, "direct_share": round(direct[m.name], 6),
                     "removal_effect": round(removal[m.name], 6)}
            if m.key:
                entry = {"role": m.role, "shapley": round(shap[m.name], 6), **{k: v for k, v in entry.items() if k != "role"}}
                roles[name] = entry
            else:
                distractors[name] = entry
        members = list(roles)
        dims[dimension_name(family, seed, rule)] = {
            "organism": organism_id(family, seed), "family": family, "rule": rule,
            "mechanism": mech_name, "aimed_at": mech.aimed_at, "trap": mech.why,
            "weight": w, "words": list(pdata.WORDS[rule]), "components": members,
            "keys": {"circuit": members,
                     "direct": [c for c in members if abs(roles[c]["direct_share"]) > 1e-9],
                     "single": [c for c in members if abs(roles[c]["removal_effect"]) > 1e-9]},
            "roles": roles, "distractors": distractors}
    return {"organism": organism_id(family, seed), "family": family, "seed": seed, "dimensions": dims,
            "channels": d["channels"]}
