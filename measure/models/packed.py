"""Sequences packed end to end, no padding: the layout the ladder sweep climbs in.

The position-wise parts of a decoder layer (norms, projections, the MLP) treat every token
alike, so sequences of different lengths can be packed into one (N, d) matrix and each part run
as one matrix product over all of them, with no padding computed. Only attention needs the
sequences apart: `attend` lays the queries, keys and values out per group of sequences of
similar length, padded to the group's longest, scores them, and packs the result back.
Used by `instruments.patching.patch_ladder` through `DecoderFamily.attn_packed`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PaddedGroup:
    """Sequences of similar length laid out padded for attention: `members` (s,) their indices;
    `gather` (s, T) the packed index of each position, a sequence padded by repeating its last
    token (which only ever follows its real ones, so causal attention never lets it reach a
    real token); `scatter` (n,) where its real tokens sit in that layout flattened (s * T);
    `tokens` (n,) their packed indices; `last` (s,) each one's last position."""
    members: torch.Tensor
    gather: torch.Tensor
    scatter: torch.Tensor
    tokens: torch.Tensor
    last: torch.Tensor


@dataclass(frozen=True)
class Packing:
    """Sequences packed end to end into N rows. `positions` (N,): each token's position in its
    sequence; `ends` (S,): the packed index of each sequence's last token; `groups`: the
    sequences cut into groups of similar length for attention (`attend`)."""
    positions: torch.Tensor
    ends: torch.Tensor
    groups: tuple[PaddedGroup, ...]

    @classmethod
    def of(cls, lengths: list[int], groups: int = 1, device=None) -> "Packing":
        """The packing of sequences of these lengths, in order, in `groups` length groups."""
        n = torch.tensor(lengths, device=device)
        starts = torch.cumsum(n, 0) - n
        by_length = sorted(range(len(lengths)), key=lambda s: (lengths[s], s))
        size = -(-len(lengths) // max(1, min(groups, len(lengths))))
        padded = []
        for first in range(0, len(lengths), size):
            members = torch.tensor(by_length[first:first + size], device=device)
            own = n[members]
            t = torch.arange(int(own.max()), device=device)
            gather = starts[members, None] + torch.minimum(t[None, :], own[:, None] - 1)
            scatter = (t[None, :] < own[:, None]).flatten().nonzero().squeeze(1)
            padded.append(PaddedGroup(members, gather, scatter, gather.flatten()[scatter], own - 1))
        positions = torch.cat([torch.arange(k, device=device) for k in lengths])
        return cls(positions, starts + n - 1, tuple(padded))

    def tile(self, copies: int) -> "Packing":
        """The packing of `copies` copies of these sequences, one after another."""
        n, s = self.positions.shape[0], self.ends.shape[0]
        k = torch.arange(copies, device=self.positions.device)

        def shifted(x, step):  # x (m, ...) -> (copies * m, ...), copy c shifted by c * step
            return (x[None] + (k * step).reshape(copies, *([1] * x.dim()))).flatten(0, 1)
        return Packing(self.positions.repeat(copies), shifted(self.ends, n), tuple(
            PaddedGroup(shifted(g.members, s), shifted(g.gather, n), shifted(g.scatter, g.gather.numel()),
                        shifted(g.tokens, n), g.last.repeat(copies))
            for g in self.groups))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packing: Packing, mask: torch.Tensor | None,
           scaling: float, softcap: float | None = None, last_only: bool = False) -> torch.Tensor:
    """Causal attention over packed sequences: keys and values (N, H_kv, k) at every token,
    queries (N, H, k) at every token, or with `last_only` (S, H, k) at each sequence's last
    token alone. `mask`: the (1, 1, T, T) additive mask of one padded sequence (a sliding
    window), None for plain causal; `softcap` (Gemma2): tanh-capped scores. Returns each
    query's attention output, (N or S, H, k_v). Heads share key-value heads in order (head h
    reads key-value head h // (H / H_kv)), as transformers' repeat_kv does."""
    heads, width = q.shape[1], v.shape[-1]
    out = q.new_empty(q.shape[0], heads, width)
    for group in packing.groups:
        span = group.gather.shape[1]
        keys, values = (x[group.gather].transpose(1, 2) for x in (k, v))  # (s, h_kv, T, k)
        if last_only:
            queries = q[group.members][:, :, None]                          # (s, H, 1, k)
            allowed = (mask[0, 0][group.last, :span] if mask is not None else torch.zeros(
                len(group.last), span, dtype=q.dtype, device=q.device).masked_fill_(
                torch.arange(span, device=q.device)[None, :] > group.last[:, None], torch.finfo(q.dtype).min))
            scored = _scores(queries, keys, values, allowed[:, None, None], scaling, softcap)
            out.index_copy_(0, group.members, scored[:, :, 0])
        else:
            queries = q[group.gather].transpose(1, 2)                       # (s, H, T, k)
            scored = _scores(queries, keys, values, None if mask is None else mask[..., :span, :span],
                             scaling, softcap).transpose(1, 2)
            out.index_copy_(0, group.tokens, scored.reshape(-1, heads, width)[group.scatter])
    return out


def _scores(q, k, v, mask, scaling, softcap):
    """(s, H, t, k) attention outputs; `mask` additive, None for plain causal."""
    if softcap is None:
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=scaling, enable_gqa=q.shape[1] != k.shape[1])
    repeat = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)
    scores = torch.tanh(q @ k.transpose(-1, -2) * scaling / softcap) * softcap
    if mask is None:
        span = k.shape[2]
        mask = torch.zeros(span, span, dtype=q.dtype, device=q.device).masked_fill_(
            torch.ones(span, span, dtype=torch.bool, device=q.device).triu(1), torch.finfo(q.dtype).min)
    return torch.softmax((scores + mask).float(), -1).to(q.dtype) @ v
