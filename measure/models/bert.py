"""The BERT family: a post-LayerNorm encoder read at its mean-pooled representation.

Layer i of a BERT encoder (Hugging Face `BertLayer`, eval mode), in the family interface's
terms (`measure/models/families.py`):

    heads_i = self-attention(h_{i-1})            the heads side by side (attention.output.dense input)
    a_i     = attention.output.dense(heads_i)    `attn_L{i}`; head j writes dense.W[:, j] heads_i[j]
    mid_i   = LN1_i(h_{i-1} + a_i)               join(i, "attn", h_{i-1}, a_i)
    m_i     = output.dense(intermediate(mid_i))  `mlp_L{i}`
    h_i     = LN2_i(mid_i + m_i)                 join(i, "mlp", mid_i, m_i)

`embed` is the embeddings' output (word + position + type, after their LayerNorm). There is no
final norm: every layer's output is already normalised.

**Scoring position.** The reward head reads the mean over real tokens ([CLS] and [SEP]
included) of the last layer's output (`read = "pooled"`); `Batch.score_idx` holds each row's
last real position, so the pooled range is `0..score_idx`. Swap mode on it: a component's output
on one response is shifted at every real position by the difference of the two responses'
pooled means of that output (`measure.instruments.patching.replacement`).

**Attribution** (observational), `decompose`: every LayerNorm's scale `1/sigma` (per token)
frozen at its value in the clean run. A LayerNorm is then affine,
`LN(x) = (g / sigma) * (x - mean(x)) + beta`, so the pooled reward is an exact sum of each
component's write carried along the residual path through every later LayerNorm and the pool,
plus the LayerNorm biases and the head's bias (booked together as `bias`). It is computed by
pulling the reward functional back through the layers: on the last output `F = w / n` at real
tokens; through a LayerNorm `F <- centre(F * g / sigma)`; a component's attribution is
`sum_t F_t . write_t` at the sum it joins. It is a direct-path decomposition: what a component
changes in a later layer's output is booked to that later layer. It sums to the reward up to
float error, which the bundle records.
"""
from __future__ import annotations

from typing import ClassVar

import torch

from measure.errors import MeasureError
from measure.models.families import HookPoints, pooled_mean


class BertFamily:
    """`BertModel`-trunk reward models whose objective heads are a linear `heads` module (one row
    per objective) over the mean-pooled last layer (`measure.models.pooled_heads.MiniLMRewardModel`)."""
    model_type: ClassVar[str] = "bert"
    residual: ClassVar[str] = "post-norm"
    read: ClassVar[str] = "pooled"

    @staticmethod
    def load_model(path, **kwargs):
        """The family's reward models are `MiniLMRewardModel` folders (trunk + objective heads + gate)."""
        from measure.models.pooled_heads import MiniLMRewardModel
        return MiniLMRewardModel.from_pretrained(path, **kwargs)

    def __init__(self, model):
        self.model = model
        config = model.config
        if getattr(config, "is_decoder", False):
            raise MeasureError("bert: a BERT decoder is not supported (the family is the encoder)")
        if not hasattr(model, "bert") or not hasattr(model, "heads"):
            raise MeasureError("bert: the model needs a `bert` trunk and a linear `heads` module "
                               "(see measure/models/pooled_heads.py)")
        self.base = model.bert
        self.score = model.heads
        self.layers = list(self.base.encoder.layer)
        self.n_layers = len(self.layers)
        self.n_heads = config.num_attention_heads
        self.d_model = config.hidden_size
        self.head_dim = self.d_model // self.n_heads
        self.final_norm = None
        self.norm_eps = config.layer_norm_eps

    # ----- the stream -------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, d): the embeddings' output, after their LayerNorm."""
        return self.base.embeddings(input_ids=ids)

    def join(self, i: int, side: str, resid: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The stream after sublayer `side` of layer i: that side's LayerNorm(resid + out)."""
        layer = self.layers[i]
        norm = layer.attention.output.LayerNorm if side == "attn" else layer.output.LayerNorm
        return norm(resid + out)

    def score_position(self, lengths: list[int]) -> list[int]:
        """Each sequence's last real token, the end of its pooled range."""
        return [n - 1 for n in lengths]  # the last real token: the end of the pooled range

    def read_out(self, resid: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, d): the stream's mean over each row's positions 0..score_idx."""
        return pooled_mean(resid.float(), score_idx)

    def context(self, width: int, lengths: list[int] | None = None):
        """The additive padding mask (B, 1, 1, T) of the batch; `attn` tiles it over the variants
        a patched run stacks (row n is batch row n mod B)."""
        if lengths is None:
            raise MeasureError("bert: context needs the batch's lengths (an encoder masks padding)")
        param = self.score.weight
        real = torch.arange(width, device=param.device)[None, :] < torch.tensor(lengths, device=param.device)[:, None]
        mask = torch.zeros(real.shape, device=param.device, dtype=param.dtype)
        mask.masked_fill_(~real, torch.finfo(param.dtype).min)
        return mask[:, None, None, :]

    # ----- attention and its heads --------------------------------------------------------------
    def attn(self, i: int, resid: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's attention output (the dense output, before the residual sum) and its heads (the dense input)."""
        layer = self.layers[i]
        mask = ctx.repeat(resid.shape[0] // ctx.shape[0], 1, 1, 1)
        heads = layer.attention.self(resid, mask)[0]
        return layer.attention.output.dense(heads), heads

    def attn_from_heads(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """The attention output from (patched) heads: the output dense applied to them."""
        return self.layers[i].attention.output.dense(heads)

    def head_writes(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """(..., H*k) -> (..., H, d): each head's dense columns applied to its slice; they sum
        to the attention output less the dense bias."""
        weight = self.layers[i].attention.output.dense.weight
        zs = heads.reshape(*heads.shape[:-1], self.n_heads, self.head_dim)
        w = weight.reshape(weight.shape[0], self.n_heads, self.head_dim)
        return torch.einsum("...hk,dhk->...hd", zs.float(), w.float())

    # ----- the MLP --------------------------------------------------------------------------------
    def mlp(self, i: int, resid_mid: torch.Tensor) -> torch.Tensor:
        """Layer i's MLP output (output.dense, before the residual sum and LayerNorm)."""
        layer = self.layers[i]
        return layer.output.dense(layer.intermediate(resid_mid))

    def hook_points(self, i: int) -> HookPoints:
        """The modules the naive hooks loop patches: both attention sides at the output dense, the MLP at output.dense."""
        layer = self.layers[i]
        return HookPoints(attn=layer.attention.output.dense, mlp=layer.output.dense,
                          heads=layer.attention.output.dense)

    def norm_gain(self) -> torch.Tensor:
        """An encoder has no final norm: asking for its gain is an error."""
        raise MeasureError("bert: there is no final norm (every layer's output is normalised)")

    # ----- attribution ------------------------------------------------------------------------
    @staticmethod
    def _pull_back(F: torch.Tensor, x: torch.Tensor, norm) -> torch.Tensor:
        """The functional on a LayerNorm's input x, its scale frozen at its value on x."""
        x = x.float()
        sigma = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + norm.eps)
        u = F * norm.weight.float() / sigma
        return u - u.mean(-1, keepdim=True)

    def decompose(self, cache) -> dict[str, torch.Tensor]:
        """{component: (B,) reward units} for embed, attn_L{i}, head_L{i}_H{j}, mlp_L{i} and
        `bias` (LayerNorm biases, the share of each attention dense bias no head holds, the
        head's bias); embed + attn + mlp + bias sums to the reward (module docstring)."""
        adapter, batch = cache.adapter, cache.batch
        B, width = batch.ids.shape
        dirs, bias = adapter.directions(B)
        real = (torch.arange(width, device=batch.ids.device)[None, :]
                <= batch.score_idx[:, None]).float()
        F = real.unsqueeze(-1) * dirs.unsqueeze(1) / real.sum(1)[:, None, None]    # on h_{L-1}
        out = self._pulled_back(cache, F, bias.clone().double())
        return {k: out[k] for k in adapter.components() + ["bias"]}

    def decompose_along(self, cache, directions: torch.Tensor, chunk: int = 16) -> dict[str, torch.Tensor]:
        """{component: (K, B)}: `decompose` along each of K directions (K, d) shared by every row,
        bias 0 (a direction's own: the LayerNorm biases' share, no head bias); the clean run's
        head writes are computed once for all K, which are taken `chunk` at a time."""
        adapter, batch = cache.adapter, cache.batch
        B, width = batch.ids.shape
        real = (torch.arange(width, device=batch.ids.device)[None, :]
                <= batch.score_idx[:, None]).float()
        pool = real.unsqueeze(-1) / real.sum(1)[:, None, None]                      # (B, T, 1)
        writes = [self.head_writes(i, cache.heads[i]) for i in range(self.n_layers)]
        parts = []
        for at in range(0, directions.shape[0], chunk):
            dirs = directions[at:at + chunk].to(pool.device).float()                  # (k, d)
            F = pool.unsqueeze(0) * dirs[:, None, None, :]                             # (k, B, T, d)
            parts.append(self._pulled_back(cache, F, torch.zeros(F.shape[:2], dtype=torch.float64,
                                                                 device=F.device), writes))
        return {k: torch.cat([p[k] for p in parts]) for k in adapter.components() + ["bias"]}

    def _pulled_back(self, cache, F: torch.Tensor, bias: torch.Tensor, writes=None) -> dict[str, torch.Tensor]:
        """The decomposition of the functional F (..., B, T, d) on the last layer's output, pulled
        back through every layer; each value (..., B). `writes`: each layer's head writes, if
        already computed."""
        dot = lambda Fn, t: (Fn * t.float()).sum((-2, -1))  # noqa: E731
        out = {"bias": bias}
        with torch.no_grad():
            for i in reversed(range(self.n_layers)):
                layer = self.layers[i]
                ln1, ln2 = layer.attention.output.LayerNorm, layer.output.LayerNorm
                out["bias"] += (F.sum(-2) @ ln2.bias.float()).double()
                G2 = self._pull_back(F, cache.resid_mid[i] + cache.mlp[i], ln2)
                out[f"mlp_L{i}"] = dot(G2, cache.mlp[i])
                out["bias"] += (G2.sum(-2) @ ln1.bias.float()).double()
                G1 = self._pull_back(G2, cache.resid_pre[i] + cache.attn[i], ln1)
                out[f"attn_L{i}"] = dot(G1, cache.attn[i])
                head = writes[i] if writes is not None else self.head_writes(i, cache.heads[i])  # (B, T, H, d)
                if G1.dim() == 3:
                    per_head = (head * G1.unsqueeze(2)).sum((1, 3))                          # (B, H)
                else:  # K directions at once: a contraction, not a (K, B, T, H, d) product
                    per_head = torch.einsum("bthd,kbtd->kbh", head, G1)                      # (K, B, H)
                for j in range(self.n_heads):
                    out[f"head_L{i}_H{j}"] = per_head[..., j]
                F = G1
            out["embed"] = dot(F, cache.embed)
        out["bias"] = out["bias"].float()
        return out
