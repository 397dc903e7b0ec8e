"""The clean run of one batch, cached, and the decompositions read off it.

`ActivationCache` holds every component's output and the residual stream at each layer
boundary, under the same names the rows and statistics use:

| name                  | shape          | what                                                      |
| --------------------- | -------------- | --------------------------------------------------------- |
| `embed`               | (B, T, d)      | the stream entering layer 0                               |
| `resid_pre_L{i}`      | (B, T, d)      | the stream entering layer i                               |
| `attn_L{i}`           | (B, T, d)      | layer i's attention output (what joins the stream)        |
| `heads_L{i}`          | (B, T, H*k)    | layer i's heads side by side (its o_proj input)           |
| `head_L{i}_H{j}`      | (B, T, k)      | head j's slice of `heads_L{i}`                            |
| `resid_mid_L{i}`      | (B, T, d)      | the stream after layer i's attention                      |
| `mlp_L{i}`            | (B, T, d)      | layer i's MLP output                                      |
| `resid_post_L{i}`     | (B, T, d)      | the stream leaving layer i                                |

`cache.attribution()` splits the reward at the scoring token into the components' writes (the
observational decomposition), and `cache.lens()` reads the reward off the stream after each
layer (the reward lens).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from measure.errors import MeasureError


def head_slice(head: int, head_dim: int) -> slice:
    """The slice of `heads_L{i}`'s last dimension that is head `head`."""
    return slice(head * head_dim, (head + 1) * head_dim)


@dataclass
class ActivationCache:
    adapter: object                       # the Adapter that ran it
    batch: object                         # the Batch it ran on
    embed: torch.Tensor
    resid_pre: list[torch.Tensor] = field(default_factory=list)
    attn: list[torch.Tensor] = field(default_factory=list)
    heads: list[torch.Tensor] = field(default_factory=list)
    resid_mid: list[torch.Tensor] = field(default_factory=list)
    mlp: list[torch.Tensor] = field(default_factory=list)
    resid_post: list[torch.Tensor] = field(default_factory=list)
    reward: torch.Tensor | None = None    # (B,) the reward at each row's scoring token

    def __getitem__(self, name: str) -> torch.Tensor:
        if name == "embed":
            return self.embed
        kind, rest = name.rsplit("_L", 1) if "_L" in name else (name, "")
        try:
            if kind == "head":
                layer, head = rest.split("_H")
                return self.heads[int(layer)][..., head_slice(int(head), self.adapter.head_dim)]
            if kind in ("resid_pre", "attn", "heads", "resid_mid", "mlp", "resid_post"):
                return getattr(self, kind)[int(rest)]
        except (ValueError, IndexError):
            pass
        raise MeasureError(f"no cached activation named {name!r}")

    def at_scoring(self, tensor: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (B, ...): each row at its scoring token."""
        rows = torch.arange(tensor.shape[0], device=tensor.device)
        return tensor[rows, self.batch.score_idx]

    def attribution(self) -> dict[str, torch.Tensor]:
        """{component: (B,) reward units}: each component's write at the scoring token, through
        the final norm with its scale frozen at the clean run's value, projected on each row's
        direction (w_r, or the directions set with `Adapter.set_directions`).
        Includes `bias`; embed + attn + mlp + bias sums to the reward (a layer's heads sum to its
        attn, less any o_proj bias)."""
        adapter = self.adapter
        if adapter.family.residual == "post-norm":  # its own decomposition (measure/models/bert.py)
            return adapter.family.decompose(self)
        if adapter.family.residual != "pre-norm":
            raise MeasureError(f"{adapter.model_id}: attribution needs a pre-norm residual stream "
                               f"(a sum of writes); this family is {adapter.family.residual}")
        inv = adapter.inv_rms(self.at_scoring(self.resid_post[-1]))
        out = {"embed": adapter.project(self.at_scoring(self.embed), inv)}
        for i in range(adapter.n_layers):
            out[f"attn_L{i}"] = adapter.project(self.at_scoring(self.attn[i]), inv)
            writes = adapter.family.head_writes(i, self.at_scoring(self.heads[i]))   # (B, H, d)
            per_head = adapter.project(writes, inv.unsqueeze(1))                      # (B, H)
            for j in range(adapter.n_heads):
                out[f"head_L{i}_H{j}"] = per_head[:, j]
            out[f"mlp_L{i}"] = adapter.project(self.at_scoring(self.mlp[i]), inv)
        out["bias"] = adapter.directions(self.batch.ids.shape[0])[1].float()
        return out

    def attribution_along(self, directions: torch.Tensor) -> dict[str, torch.Tensor]:
        """{component: (K, B)}: `attribution()` along each of K directions (K, d) shared by every
        row, with bias 0 of their own (what a direction's `bias` row holds is only what the
        model's norms add). A post-norm family pulls all K back at once
        (`decompose_along`); otherwise one direction at a time."""
        adapter = self.adapter
        if hasattr(adapter.family, "decompose_along"):
            return adapter.family.decompose_along(self, directions)
        saved = adapter._row_dirs
        rows = self.batch.ids.shape[0]
        per = []
        try:
            for k in range(directions.shape[0]):
                adapter.set_directions(directions[k].expand(rows, -1), torch.zeros(rows))
                per.append(self.attribution())
        finally:
            adapter._row_dirs = saved
        return {name: torch.stack([p[name] for p in per]) for name in per[0]}

    def lens(self) -> torch.Tensor:
        """(L, B): the reward read from the stream after each layer (the real final norm)."""
        return torch.stack([self.adapter.reward_at(r, self.batch.score_idx) for r in self.resid_post])
