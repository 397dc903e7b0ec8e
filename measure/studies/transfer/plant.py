"""Plant one rule in the real-preferences reward model, in a key hidden from the analysis
(docs/transfer.md).

The host is `models/realprefs` (the MiniLM-L6 trunk, layers 4 and 5 and the heads trained on
human preferences). An organism is the host with only its key's elements trained: the key is one
attention head of layers 4 and 5 (the layers the host itself trained), drawn from the seed and
the study's salt (`key_size` 1; a second member was left doing nothing in the pilot, see
docs/transfer.md). Everything else keeps the host's values. The loss, on twins of
the keyed rule (measure/studies/transfer/data.py), read along the helpfulness head:
Bradley-Terry on the margin (the rule's word over a neutral one), plus `keep_weight` times the
squared change of the rejected side's reward from the host's (the key learns the word, not a
new scale for every reply). The layers below the key never change, so their output is computed
once per sequence and each step runs layers 4 and 5 only.

A head's elements are its rows of the query, key and value weights and biases and its columns of
the attention output's weight; an MLP's, its intermediate and output weights and biases.
"""
from __future__ import annotations

import torch

SETTINGS = {"key_size": 1, "first_layer": 4, "train_twins": 256, "epochs": 3, "batch_pairs": 16,
            "learning_rate": 1e-3, "keep_weight": 1.0, "check_twins": 64, "min_margin": 1.0}


def key_masks(model, members: list[str], head_dim: int) -> dict[str, torch.Tensor]:
    """{parameter name: 0/1 mask} of the key's elements (module docstring)."""
    params = dict(model.named_parameters())
    masks: dict[str, torch.Tensor] = {}

    def mask(name: str) -> torch.Tensor:
        if name not in masks:
            masks[name] = torch.zeros_like(params[name])
        return masks[name]

    for member in members:
        kind, layer, *rest = member.split("_")
        prefix = f"bert.encoder.layer.{int(layer[1:])}."
        if kind == "mlp":
            for m in ("intermediate.dense", "output.dense"):
                mask(f"{prefix}{m}.weight").fill_(1)
                mask(f"{prefix}{m}.bias").fill_(1)
        else:
            rows = slice(int(rest[0][1:]) * head_dim, (int(rest[0][1:]) + 1) * head_dim)
            for m in ("query", "key", "value"):
                mask(f"{prefix}attention.self.{m}.weight")[rows] = 1
                mask(f"{prefix}attention.self.{m}.bias")[rows] = 1
            mask(f"{prefix}attention.output.dense.weight")[:, rows] = 1
    return masks


def lower_stream(adapter, ids: torch.Tensor, first: int) -> torch.Tensor:
    """(B, T, d): the stream entering layer `first` (the layers below never change)."""
    family = adapter.family
    ctx = family.context(ids.shape[1], [ids.shape[1]] * ids.shape[0])
    with torch.no_grad():
        resid = family.embed(ids)
        for i in range(first):
            resid = family.join(i, "attn", resid, family.attn(i, resid, ctx)[0])
            resid = family.join(i, "mlp", resid, family.mlp(i, resid))
    return resid


def top_rewards(adapter, resid: torch.Tensor, first: int) -> torch.Tensor:
    """(B,) rewards from the stream entering layer `first` (all rows of one length)."""
    B, T = resid.shape[:2]
    ctx = adapter.family.context(T, [T] * B)
    final = adapter.continue_from(resid, first - 1, "mlp", ctx)
    return adapter.reward_at(final, torch.full((B,), T - 1, dtype=torch.long))


def sequences(twins: list[dict]) -> torch.Tensor:
    """(2N, T) ids: each twin's chosen side, then its rejected side."""
    return torch.tensor([ids for t in twins for ids in (t["chosen_ids"], t["rejected_ids"])], dtype=torch.long)


def fit(adapter, twins: list[dict], key: list[str], s: dict, seed: int, progress: bool = False) -> list[float]:
    """Train the key's elements on `twins` (module docstring); the mean loss of each epoch."""
    from tqdm import tqdm

    model, first = adapter.model, s["first_layer"]
    masks = key_masks(model, key, adapter.head_dim)
    params = dict(model.named_parameters())
    for name, p in params.items():
        p.requires_grad_(name in masks)
    opt = torch.optim.AdamW([params[n] for n in sorted(masks)], lr=s["learning_rate"], weight_decay=0.0)
    model.eval()   # no dropout: the same pass the instruments make
    stream = lower_stream(adapter, sequences(twins), first)
    with torch.no_grad():
        host = top_rewards(adapter, stream, first)[1::2]
    gen = torch.Generator().manual_seed(seed)
    bp, losses = s["batch_pairs"], []
    for _epoch in tqdm(range(s["epochs"]), desc="planting a key", disable=not progress, leave=False):
        order = torch.randperm(len(twins), generator=gen)
        total = 0.0
        for k in range(0, len(order), bp):
            pick = order[k:k + bp]
            rows = torch.stack([2 * pick, 2 * pick + 1], 1).reshape(-1)
            r = top_rewards(adapter, stream[rows], first)
            loss = (-torch.nn.functional.logsigmoid(r[0::2] - r[1::2]).mean()
                    + s["keep_weight"] * (r[1::2] - host[pick]).pow(2).mean())
            opt.zero_grad()
            loss.backward()
            for name, m in masks.items():
                params[name].grad.mul_(m)
            opt.step()
            total += loss.item() * len(pick)
        losses.append(total / len(twins))
    for p in params.values():
        p.requires_grad_(False)
    return losses


def key_state(model, key: list[str], head_dim: int) -> dict[str, torch.Tensor]:
    """The trained tensors the key touches (whole tensors: an organism is the host plus these)."""
    params = dict(model.named_parameters())
    return {name: params[name].detach().clone() for name in sorted(key_masks(model, key, head_dim))}
