"""Read-outs: the directions along which a study measures its pairs, part of its plan.

A pair's reward is its final representation read along a direction. By default that is the
model's own score row (`--objective`); a study may read every pair along several named
directions instead (the head of the cross-validation fold that did not train on the pair, a
random unit direction as a control), each giving its own rows. A `Read` is one of them: one
direction and bias per pair of the plan, what is measured along it, and the prefix of its files.
Rows along a named read carry `direction` (after `seed_id`); the default read's rows have no
such field, so a study that reads along the score row writes the rows it always has.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from bundle_kit import contract

# Row kind -> file name: what a read writes (the head files only when it measures heads).
KINDS = {"attribution": contract.ATTRIBUTION, "attribution_heads": contract.HEADS_ATTRIBUTION,
         "patching": contract.PATCHING, "patching_heads": contract.HEADS_PATCHING, "lens": contract.LENS}


@dataclass(frozen=True, eq=False)
class Read:
    """One read-out of every pair of a plan."""
    name: str | None = None                  # rows' `direction`; None: the score row, rows without the field
    directions: torch.Tensor | None = None   # (P, d): pair p's direction, in plan order; None: the score row
    biases: torch.Tensor | None = None       # (P,)
    modes: tuple[str, ...] = contract.MODES  # patching modes measured along it
    lens: bool = True                        # the reward lens
    heads: bool = True                       # head rows: attribution always, patching if `patch_heads`
    patch_heads: bool = True
    prefix: str = ""                         # of its row kinds and file names (`random_` ...)
    head_modes: tuple[str, ...] | None = None  # the heads' patching modes (None: `modes`)
    sources: torch.Tensor | None = None      # (P, 2) long: for `resample`, the plan sequence (2 * pair
                                             # + side) whose output each pair's chosen and rejected take

    def files(self) -> dict[str, str]:
        """{row kind: file name} of every file this read writes, its prefix applied."""
        kinds = [k for k in KINDS if (self.heads or "heads" not in k) and (self.lens or k != "lens")]
        return {self.prefix + k: self.prefix + KINDS[k] for k in kinds}

    def fingerprint(self) -> list:
        """What of the read changes the numbers (in the plan's fingerprint)."""
        digest = hashlib.sha256()
        for tensor in (self.directions, self.biases):
            if tensor is not None:
                digest.update(tensor.detach().float().contiguous().cpu().numpy().tobytes())
        out = [self.name, list(self.modes), self.lens, self.heads, self.patch_heads, self.prefix,
               None if self.directions is None else digest.hexdigest()]
        if self.head_modes is not None or self.sources is not None:  # absent: the fingerprints of before
            out += [None if self.head_modes is None else list(self.head_modes),
                    None if self.sources is None else self.sources.tolist()]
        return out

    @property
    def modes_of_heads(self) -> tuple[str, ...]:
        """The modes the heads are patched in."""
        return self.modes if self.head_modes is None else self.head_modes

    def set_on(self, adapter, rows: torch.Tensor) -> None:
        """Point the adapter at this read for a batch of plan rows (`rows`: the pair index of
        every sequence)."""
        if self.directions is None:
            adapter.set_directions(None)
        else:
            adapter.set_directions(self.directions[rows], self.biases[rows])


def files(reads: list[Read]) -> dict[str, str]:
    """{row kind: file name} over every read of a plan, in read order."""
    out = {}
    for read in reads:
        out.update(read.files())
    return out
