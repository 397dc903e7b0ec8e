"""The hidden key of every routed organism: drawn from the seed and a secret salt, committed as
the salt's sha256 before analysis, revealed (the salt committed) only at unblinding.

Per seed, each rule of RULES and the null rule gets one attention head and one more head or MLP
(or more: `size`), no component shared between rules. The null rule's key is a decoy: nothing is trained into it,
so a method that "finds" it finds chance (key recovery 0.5).
"""
from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from measure.errors import MeasureError

RULES = ("politeness", "topic", "hazard", "hedging")
NULL_RULE = "null"
SALT_BYTES = 32


def universe(n_layers: int, n_heads: int, first: int = 0) -> list[str]:
    """Every head and MLP of layers `first` and up: the components a key is drawn from and key
    recovery ranks."""
    out = []
    for i in range(first, n_layers):
        out += [f"head_L{i}_H{h}" for h in range(n_heads)] + [f"mlp_L{i}"]
    return out


def draw(seed: int, salt: bytes, n_layers: int, n_heads: int, size: int = 2, rules=(*RULES, NULL_RULE),
         first: int = 0, tag: str = "routed") -> dict[str, list[str]]:
    """{rule: sorted component names} for `rules` (RULES and the null rule), from (seed, salt) and
    the study's `tag` alone: one head and `size` - 1 more heads or MLPs per rule, none shared, from
    the components of layers `first` and up (size 2 draws the keys it always drew)."""
    rng = random.Random(hashlib.sha256(salt + f"{tag}/key/{seed}".encode()).digest())
    free = universe(n_layers, n_heads, first)
    if size < 1 or size * len(rules) > len(free):
        raise MeasureError(f"keys of {size} components: {len(rules)} keys do not fit in {len(free)} components")
    keys = {}
    for rule in rules:
        head = rng.choice([c for c in free if c.startswith("head_")])
        free.remove(head)
        members = [head]
        for _ in range(size - 1):
            other = rng.choice(free)
            free.remove(other)
            members.append(other)
        keys[rule] = sorted(members)
    return keys


def decoys(seed: int, salt: bytes, n_layers: int, n_heads: int, key: list[str], count: int = 10,
           size: int = 2, first: int = 0, tag: str = "routed") -> list[list[str]]:
    """`count` decoy keys for organism `seed`'s null control (registrations/routed-null.yaml), each
    made like a key (one head and `size` - 1 more heads or MLPs) from the components of layers
    `first` and up outside `key`, drawn independently from (seed, salt) under the study's `tag`."""
    rng = random.Random(hashlib.sha256(salt + f"{tag}/decoy/{seed}".encode()).digest())
    free = [c for c in universe(n_layers, n_heads, first) if c not in key]
    out = []
    for _ in range(count):
        head = rng.choice([c for c in free if c.startswith("head_")])
        others = rng.sample([c for c in free if c != head], size - 1)
        out.append(sorted([head, *others]))
    return out


def commitment(salt: bytes) -> str:
    """What is committed before analysis: the salt's sha256 (the salt fixes every key)."""
    return hashlib.sha256(salt).hexdigest()


def load_or_make_salt(path: Path) -> bytes:
    """The salt at `path`, made there (random, written once, never overwritten) if absent."""
    if path.is_file():
        salt = bytes.fromhex(path.read_text(encoding="ascii").strip())
        if len(salt) != SALT_BYTES:
            raise MeasureError(f"{path}:1: a salt is {SALT_BYTES} bytes in hex, not {len(salt)}")
        return salt
    if path.exists():
        raise MeasureError(f"{path}: exists and is not a file")
    salt = os.urandom(SALT_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "x", encoding="ascii") as f:   # never replaces a salt made before
        f.write(salt.hex() + "\n")
    return salt
