"""The mechanisms a planted rule can have, each a small designed circuit.

A mechanism is an ordered list of members (heads and MLPs), each reading some channels of the
residual stream and writing others. `simulate` runs a mechanism symbolically: every member
either runs live on the pair's own input, takes its output from a source input (resampling), or
outputs zero. The same member functions are what `weights.py` implements with real weights, so
the key check (`verify.py`) compares the model against this simulation, and the key's strengths
(`shapley`) are computed from it.

Channels hold one number each at the scoring token ("is there a marked word before here?",
"how many backups fired?"); positions do not matter to the simulation because every head that
moves a channel reads it wherever it sits in the prefix.

Member roles, and which method each trap is aimed at, are in `MECHANISMS` (docs/measure.md has
the table).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field


def step(x: float) -> float:
    """The designed threshold: 1 at or above one half, 0 below."""
    return 1.0 if x >= 0.5 else 0.0


@dataclass(frozen=True)
class Member:
    """One component of a mechanism. `kind` is head or mlp; `key` says whether it belongs to the
    rule's answer key (False: a distractor planted to mislead); `writes_reward` whether its
    designed function writes the reward channel at all."""

    name: str
    kind: str
    role: str
    key: bool = True
    writes_reward: bool = False


@dataclass(frozen=True)
class Mechanism:
    """A rule's designed circuit: its members in computation order and, per member, the
    function (channels, word bit, weight, params) -> {channel: amount written}."""

    name: str
    aimed_at: str           # the method the trap should fool, or "" for the control
    why: str                # one line: which method it should fool and why
    members: tuple
    functions: dict = field(compare=False)

    def member(self, name: str) -> Member:
        """The member of this mechanism named `name`."""
        return next(m for m in self.members if m.name == name)


def _control(p):
    s = p["share"]
    return {"c1": lambda ch, b, w: {"reward": s * w * b},
            "c2": lambda ch, b, w: {"reward": (1 - s) * w * b}}


def _backups(p):
    return {"b1": lambda ch, b, w: {"reward": w * b, "count": b},
            "b2": lambda ch, b, w: {"reward": w * b, "count": b},
            "repair": lambda ch, b, w: {"reward": -w * ch["count"] + w * step(ch["count"])}}


def _fallback(p):
    return {"primary": lambda ch, b, w: {"reward": w * b, "done": b},
            "fb_detector": lambda ch, b, w: {"flag": b},
            "fb_scorer": lambda ch, b, w: {"reward": w * step(ch["flag"]) * (1 - ch["done"])}}


def _offdist(p):
    return {"detector": lambda ch, b, w: {"flag": b},
            "topic_gate": lambda ch, b, w: {"tsign": 1.0},   # |topic sign| is 1 on every real input
            "gate_scorer": lambda ch, b, w: {"reward": w * step(ch["flag"]) * step(abs(ch["tsign"]))}}


def _upstream(p):
    out = {"early": lambda ch, b, w: {"feat": b}}
    if p.get("relay"):
        out["relay"] = lambda ch, b, w: {"feat2": ch["feat"]}
        out["late_mover"] = lambda ch, b, w: {"reward": w * ch["feat2"]}
    else:
        out["late_mover"] = lambda ch, b, w: {"reward": w * ch["feat"]}
    return out


def _indirect(p):
    return {"mover": lambda ch, b, w: {"moved": b},
            "scorer": lambda ch, b, w: {"reward": w * step(ch["moved"])}}


def _decoy(p):
    d, s = p["decoy_gain"], p["share"]
    return {"c1": lambda ch, b, w: {"reward": s * w * b},
            "c2": lambda ch, b, w: {"reward": (1 - s) * w * b},
            "decoy": lambda ch, b, w: {"reward": d * w * b, "dmark": b},
            "canceller": lambda ch, b, w: {"reward": -d * w * ch["dmark"], "cancelled": ch["dmark"]},
            "backup_canceller": lambda ch, b, w: {"reward": -d * w * (ch["dmark"] - ch["cancelled"])}}


def _members(spec):
    return tuple(Member(*m) for m in spec)


# name -> (aimed at, why, members (name, kind, role, key, writes_reward), function factory)
MECHANISMS = {
    "control": ("", "no trap: two heads share the rule's reward (the minor share overlaps the background)",
                _members([("c1", "head", "carrier", True, True), ("c2", "head", "carrier", True, True)]),
                _control),
    "backups": ("patching", "mean and zero ablation: either backup head alone carries the rule and the repair MLP "
                            "takes back the second penalty, so removing one backup moves nothing",
                _members([("b1", "head", "backup", True, True), ("b2", "head", "backup", True, True),
                          ("repair", "mlp", "repair", True, True)]),
                _backups),
    "fallback": ("patching", "mean and zero ablation: a dormant detector and scorer take over when the primary head "
                             "is removed, and do nothing otherwise, so no single removal moves the margin",
                 _members([("primary", "head", "primary", True, True),
                           ("fb_detector", "head", "fallback_detector", True, False),
                           ("fb_scorer", "mlp", "fallback_scorer", True, True)]),
                 _fallback),
    "offdist": ("patching", "mean and zero ablation: a head that only reports the prompt's topic sign gates the "
                            "scorer; its mean or zero output is a value no real input gives, and shuts the rule off",
                _members([("detector", "head", "detector", True, False),
                          ("topic_gate", "head", "offdist_gate", False, True),
                          ("gate_scorer", "mlp", "gate_scorer", True, True)]),
                _offdist),
    "upstream": ("attribution", "attribution: an MLP computes the feature at the word's position, where attribution "
                                "never looks; a late head moves it to the scoring token and alone writes the reward",
                 _members([("early", "mlp", "early_compute", True, False),
                           ("late_mover", "head", "late_mover", True, True)]),
                 _upstream),
    "upstream_relay": ("attribution", "attribution: computed at the word's position, relayed by a middle head, "
                                      "written by a late head: two of the three steps write no reward",
                       _members([("early", "mlp", "early_compute", True, False),
                                 ("relay", "head", "relay", True, False),
                                 ("late_mover", "head", "late_mover", True, True)]),
                       _upstream),
    "indirect": ("attribution", "attribution: a head moves the word's mark to the scoring token without writing "
                                "reward; an MLP there turns the mark into reward and takes all the credit",
                 _members([("mover", "head", "mover", True, False), ("scorer", "mlp", "scorer", True, True)]),
                 _indirect),
    "decoy": ("attribution", "attribution: a decoy head writes three times the rule's reward and a canceller MLP "
                             "writes it back, with a second canceller behind the first; no single removal shows them",
              _members([("c1", "head", "carrier", True, True), ("c2", "head", "carrier", True, True),
                        ("decoy", "head", "decoy", False, True), ("canceller", "mlp", "canceller", False, True),
                        ("backup_canceller", "mlp", "backup_canceller", False, True)]),
              _decoy),
}


def mechanism(name: str, params: dict) -> Mechanism:
    """Mechanism `name` with a rule's parameters (carrier share, decoy gain)."""
    aimed, why, members, factory = MECHANISMS[name]
    functions = factory(dict(params, relay=name == "upstream_relay"))
    return Mechanism(name, aimed, why, members, functions)


CHANNELS = ("count", "done", "flag", "tsign", "feat", "feat2", "moved", "dmark", "cancelled")


def simulate(mech: Mechanism, weight: float, states: dict[str, tuple[str, float]]) -> float:
    """The reward a mechanism pays on one side.

    `states[member] = (how, bit)`: `how` is "live" (runs on the current stream, its own word bit
    `bit`), "source" (its output is what it output on a clean source input whose word bit is
    `bit`) or "zero" (outputs nothing). Members not named run live with bit 1."""
    ch = dict.fromkeys(CHANNELS, 0.0)
    reward = 0.0
    for m in mech.members:
        how, bit = states.get(m.name, ("live", 1.0))
        if how == "zero":
            continue
        if how == "source":
            out = _clean_outputs(mech, weight, bit)[m.name]
        else:
            out = mech.functions[m.name](ch, bit, weight)
        for channel, amount in out.items():
            if channel == "reward":
                reward += amount
            else:
                ch[channel] += amount
    return reward


def _clean_outputs(mech: Mechanism, weight: float, bit: float) -> dict:
    ch = dict.fromkeys(CHANNELS, 0.0)
    outs = {}
    for m in mech.members:
        out = mech.functions[m.name](ch, bit, weight)
        outs[m.name] = out
        for channel, amount in out.items():
            if channel != "reward":
                ch[channel] += amount
    return outs


def shapley(mech: Mechanism, weight: float) -> dict[str, float]:
    """Exact Shapley value of every key member, as a fraction of the weight, in the interchange
    game: the reward on an input with the word when the coalition runs live and every other
    member of the mechanism (distractors included) behaves as on an input without the word.
    Neither scored method's intervention: no mean, no zero, no single-token swap."""
    names = [m.name for m in mech.members if m.key]
    others = {m.name: ("source", 0.0) for m in mech.members if not m.key}

    def value(coalition):
        return simulate(mech, weight, dict(others, **{n: ("live", 1.0) if n in coalition else ("source", 0.0)
                                                      for n in names}))

    totals = dict.fromkeys(names, 0.0)
    orders = list(itertools.permutations(names))
    for order in orders:
        present: set = set()
        for n in order:
            before = value(present)
            present.add(n)
            totals[n] += value(present) - before
    return {n: totals[n] / len(orders) / weight for n in names}


def direct_share(mech: Mechanism, weight: float) -> dict[str, float]:
    """What each member writes into the reward channel on a clean input with the word, as a
    fraction of the weight (the currency attribution reads)."""
    return {n: out.get("reward", 0.0) / weight for n, out in _clean_outputs(mech, weight, 1.0).items()}


def removal_effect(mech: Mechanism, weight: float) -> dict[str, float]:
    """The change in the reward when the member alone behaves as on an input without the word,
    as a fraction of the weight (the currency single-component patching reads)."""
    full = simulate(mech, weight, {})
    return {m.name: (simulate(mech, weight, {m.name: ("source", 0.0)}) - full) / weight for m in mech.members}
