"""Claim kinds: what kind of claim a figure or a value can support, from its data alone.

Patching intervenes, so it is causal; attribution and the reward lens read activations without
intervening, so they are observational; a statistic that sets one against the other (a rank
correlation, a gap between the two methods' key recovery) is "observational vs causal". A
declared kind must equal the kind its data give; the check never takes the author's word.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath

from bundle_kit import contract

from ..schema import CAUSAL, CLAIMS, COMPARISON, FIGURE_KINDS, OBSERVATIONAL

KINDS = CLAIMS

FILE_KINDS = {
    contract.ATTRIBUTION: OBSERVATIONAL, contract.HEADS_ATTRIBUTION: OBSERVATIONAL,
    contract.LENS: OBSERVATIONAL,
    contract.PATCHING: CAUSAL, contract.HEADS_PATCHING: CAUSAL,
}
# Words of a key path (split at '/', '_', '-', '.') that give a summary value its kind, first
# match wins. A rank correlation sets the two methods against each other. A value under
# `counts/` is a count of rows or components: it supports no claim about the model.
WORD_KINDS = (
    ({"rho"}, COMPARISON),
    ({"patching"}, CAUSAL),
    ({"attribution", "lens", "crystallization"}, OBSERVATIONAL),
)
NEUTRAL_ROOTS = {"counts"}
# The score a ranking by chance gets (an AUC of 0.5): a constant beside the methods' scores.
NEUTRAL_LEAVES = {"chance"}
# The key's own verification (resample ablation, path patching) intervenes on the model.
CAUSAL_ROOTS = {"key_check"}
# Key recovery scores the methods against a key: one method's score has that method's kind; a
# gap, a per-rule or per-organism table of both, or anything naming neither, compares them.
SCORECARD_ROOTS = {"key_recovery"}
METHOD_WORDS = {"attribution": OBSERVATIONAL, "patching": CAUSAL}


def value_kind(source: str, expression: str) -> str | None:
    """The claim kind a resolved value supports (None: a count or a label, no kind)."""
    name = PurePosixPath(source).name
    if name in FILE_KINDS:
        return FILE_KINDS[name]
    key = expression.split("#", 1)[1] if "#" in expression else ""
    key = key.split("|", 1)[0].strip()
    parts = [p for p in key.split("/") if p]
    if not parts or parts[0] in NEUTRAL_ROOTS or parts[-1] in NEUTRAL_LEAVES:
        return None
    words = {w for p in parts for w in re.split(r"[_\-.]", p.lower())}
    if parts[0] in CAUSAL_ROOTS:
        return CAUSAL
    if parts[0] in SCORECARD_ROOTS:
        methods = {kind for word, kind in METHOD_WORDS.items() if word in words}
        return methods.pop() if len(methods) == 1 and "gap" not in words else COMPARISON
    for vocabulary, kind in WORD_KINDS:
        if words & vocabulary:
            return kind
    return None


def figure_claim(kind: str, data: dict) -> str | None:
    """The claim kind a figure of `kind` drawing `data` supports: the one its kind declares
    (site_src/schema.py FIGURE_KINDS), or the kind of the value it draws (observational when
    that value is neutral)."""
    declared = FIGURE_KINDS.get(kind)
    if declared is None:
        return None
    if declared.claim_from:
        ref = str(data.get(declared.claim_from) or "") if isinstance(data, dict) else ""
        return value_kind(ref, ref) or OBSERVATIONAL
    return declared.claim


def page_kind(kinds) -> str | None:
    """The kind a page's figures and values support together (None: they carry no kind)."""
    found = {k for k in kinds if k}
    if not found:
        return None
    if COMPARISON in found or {OBSERVATIONAL, CAUSAL} <= found:
        return COMPARISON
    return found.pop()
