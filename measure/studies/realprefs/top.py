"""The trained part of the realprefs reward model: the trunk's top layers and one head per objective.

`TopModel` takes a sequence's cached lower-layer states (`lower.py`), runs them through its copies
of the trunk's top layers, mean-pools the last layer over every token ([CLS] and [SEP] included,
as `measure.models.pooled_heads.MiniLMRewardModel` does) and reads one scalar per objective:
`r_k(x) = w_k . pool(x) + b_k`. Its tensors are named as in `MiniLMRewardModel`
(`bert.encoder.layer.{i}.*`, `heads.weight`, `heads.bias`), so the delta it writes replaces
exactly those tensors of the pinned trunk (`model.py`).

Dropout stays off (the modules stay in eval mode while their gradients flow): the run is one
short pass over the data, and a dropout mask would be one more random state for a resumed run to
restore.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

INIT_STD = 0.02  # the heads' initial weights: the trunk's own initializer_range


class TopModel(nn.Module):
    """The trunk's layers `first..` (copies) and a linear head per objective over their mean-pooled output."""

    def __init__(self, bert, first: int, objectives: int, seed: int):
        super().__init__()
        self.first = first
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in bert.encoder.layer[first:])
        self.heads = nn.Linear(bert.config.hidden_size, objectives)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.heads.weight.copy_(torch.randn(self.heads.weight.shape, generator=g) * INIT_STD)
            self.heads.bias.zero_()
        self.eval()  # no dropout (module docstring)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """(T, d) cached lower-layer states of one sequence -> (K,) its reward along every objective."""
        hidden = states.unsqueeze(0)
        for layer in self.layers:
            hidden = layer(hidden)  # a lone sequence: no padding, no mask
        return self.heads(hidden[0].mean(0))

    def delta(self) -> dict[str, torch.Tensor]:
        """{MiniLMRewardModel tensor name: float32 tensor}: every trained tensor, contiguous."""
        out = {}
        for i, layer in enumerate(self.layers):
            for name, tensor in layer.state_dict().items():
                out[f"bert.encoder.layer.{self.first + i}.{name}"] = tensor.detach().float().contiguous().clone()
        out["heads.weight"] = self.heads.weight.detach().float().contiguous().clone()
        out["heads.bias"] = self.heads.bias.detach().float().contiguous().clone()
        return out

    def parameter_groups(self, lr_layers: float, lr_heads: float, weight_decay: float) -> list[dict]:
        """AdamW groups: the layers' matrices (decayed), their biases and LayerNorm gains (not
        decayed), the heads (their own learning rate, not decayed)."""
        matrices = [p for layer in self.layers for p in layer.parameters() if p.dim() >= 2]
        vectors = [p for layer in self.layers for p in layer.parameters() if p.dim() < 2]
        return [{"params": matrices, "lr": lr_layers, "weight_decay": weight_decay, "name": "layers"},
                {"params": vectors, "lr": lr_layers, "weight_decay": 0.0, "name": "layers_vectors"},
                {"params": list(self.heads.parameters()), "lr": lr_heads, "weight_decay": 0.0, "name": "heads"}]
