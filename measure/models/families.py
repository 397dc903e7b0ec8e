"""Family objects: where each architecture keeps its parts, one object per architecture.

A family object wraps one loaded `*ForSequenceClassification` model and answers, for that
architecture only, where the pieces the instruments need live: the embedding, each layer's
attention output and its heads (the o_proj input), the MLP output, the norms, the final norm and
the score head. Everything else in `measure/` is written against this interface, so adding an
architecture is adding one class here and one line to `FAMILIES`; nothing else branches on the
architecture.

Shapes in the annotations: `B` sequences, `T` positions, `d` the model width (`d_model`),
`H` attention heads, `k` the head width (`head_dim`), so the heads of one layer are `H*k` wide.

The interface (every family implements all of it):

    model_type: str                      the `config.model_type` it serves (the registry key)
    residual: str                        "pre-norm": a sublayer's output is added to the stream
                                         (x + f(x)); "post-norm" (BERT): the stream after a
                                         sublayer is LayerNorm(x + f(x)), see `join`
    base, layers, n_layers, n_heads, head_dim, d_model
    embed(ids: Long[B, T]) -> [B, T, d]                  the stream entering layer 0
    context(width: int, lengths: list[int] | None) -> ctx
                                                         what every layer needs besides the
                                                         stream (positions, masks). `lengths`
                                                         are the rows' real lengths (decoders,
                                                         right-padded and causal, ignore them;
                                                         a bidirectional encoder masks the
                                                         padding). The stream a layer gets may
                                                         be the batch's rows repeated n times
                                                         (the sweep stacks patched variants),
                                                         so a per-row mask is tiled to match
    attn(i, resid: [B, T, d], ctx) -> ([B, T, d], [B, T, H*k])
                                                         layer i's attention output (what joins
                                                         the stream) and its heads' o_proj input
    attn_from_heads(i, heads: [B, T, H*k]) -> [B, T, d]  the attention output from (patched) heads
    attn_packed(i, resid: [N, d], packing, ctx, last_only) -> ([N, d], [N, H*k])
                                                         decoders only (the ladder sweep): `attn`
                                                         for sequences packed end to end
                                                         (measure/models/packed.py)
    head_writes(i, heads: [..., H*k]) -> [..., H, d]     each head's part of the attention
                                                         output; they sum to it over H
    mlp(i, resid_mid: [B, T, d]) -> [B, T, d]            layer i's MLP output
    join(i, side, resid: [B, T, d], out: [B, T, d]) -> [B, T, d]
                                                         the stream after sublayer `side`
                                                         ("attn" or "mlp") of layer i adds its
                                                         output (pre-norm: resid + out; BERT:
                                                         that side's LayerNorm(resid + out))
    hook_points(i) -> HookPoints                         the modules whose output is layer i's
                                                         attention / MLP output, and the module
                                                         whose input is its heads (for the naive
                                                         hooks loop, which runs the model's own
                                                         forward pass)
    final_norm: module | None; norm_gain() -> [d]; norm_eps
                                                         the final norm, g * x / rms(x), which
                                                         attribution linearises (None for a
                                                         post-norm encoder, which has none)
    score: module ([..., d] -> [..., n_labels])          the score head
    score_position(lengths: list[int]) -> list[int]      the scoring token of each sequence
    read: "token" | "pooled"; read_out(resid: [B, T, d], score_idx) -> [B, d]
                                                         what the head reads: the stream at the
                                                         scoring token, or its mean over the
                                                         real tokens 0..score_idx (pooled)

The decoder families (Llama, Mistral, Qwen2, Qwen3, Gemma2) are pre-norm with causal attention
and read the reward at the last real token; a post-norm encoder (BERT, MiniLM) reads it at the
mean over its real tokens (`measure/models/bert.py`), sets `residual = "post-norm"` and `final_norm =
None`, and brings its own attribution (`decompose`: every LayerNorm's scale frozen), since its
stream is not a plain sum of writes.

The families call model internals (`self_attn`, `o_proj`, `rotary_emb`, the norms by name), so
they are tested against the transformers range pinned in pyproject.toml.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from measure.errors import MeasureError
from measure.models.packed import Packing, attend


def pooled_mean(tensor: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
    """(N, T, ...) -> (N, ...): each row's mean over its positions 0..score_idx (a pooled read)."""
    width = tensor.shape[1]
    real = (torch.arange(width, device=tensor.device)[None, :] <= score_idx[:, None]).to(tensor.dtype)
    real = real.reshape(*real.shape, *([1] * (tensor.dim() - 2)))
    return (tensor * real).sum(1) / real.sum(1)


@dataclass(frozen=True)
class HookPoints:
    """Modules of one layer for forward hooks: `attn` and `mlp` output the sublayer's
    contribution to the stream; `heads` takes the concatenated heads as its first input."""
    attn: torch.nn.Module
    mlp: torch.nn.Module
    heads: torch.nn.Module


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of (N, h, k) at each token's (N, k) cos and sin: the halves of each head
    rotated, as transformers' apply_rotary_pos_emb does."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos[:, None] + rotated * sin[:, None]


def _causal(width: int, like: torch.Tensor) -> torch.Tensor:
    """(1, 1, T, T) the additive causal mask, as `DecoderFamily.context` builds it."""
    allowed = torch.ones(width, width, dtype=torch.bool, device=like.device).tril()
    return torch.zeros(width, width, dtype=like.dtype, device=like.device).masked_fill_(
        ~allowed, torch.finfo(like.dtype).min)[None, None]


class Family(Protocol):
    """The interface above, as a type (the shapes are in the module docstring)."""
    model_type: ClassVar[str]
    residual: ClassVar[str]
    base: torch.nn.Module
    layers: list
    n_layers: int
    n_heads: int
    head_dim: int
    d_model: int
    final_norm: torch.nn.Module | None
    norm_eps: float
    score: torch.nn.Module

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, d): the stream entering layer 0."""

    def context(self, width: int, lengths: list[int] | None = None):
        """What every layer needs besides the stream (rotary, masks) for a batch of this width."""

    def attn(self, i: int, resid: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's attention output (what joins the stream) and its heads side by side."""

    def attn_from_heads(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """The attention output from (patched) heads."""

    def head_writes(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """(..., H*k) -> (..., H, d): each head's part of the attention output."""

    def mlp(self, i: int, resid_mid: torch.Tensor) -> torch.Tensor:
        """Layer i's MLP output."""

    def join(self, i: int, side: str, resid: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The stream after sublayer `side` (attn or mlp) of layer i adds its output."""

    def hook_points(self, i: int) -> HookPoints:
        """The modules of layer i the naive hooks loop patches."""

    def norm_gain(self) -> torch.Tensor:
        """(d,) the gain of the final norm that attribution linearises."""

    def score_position(self, lengths: list[int]) -> list[int]:
        """The scoring token of each sequence of these lengths."""


class DecoderFamily:
    """Llama-style pre-norm decoder layer: x + attn(norm(x)), then x + mlp(norm(x))."""
    model_type: ClassVar[str] = "llama"
    residual: ClassVar[str] = "pre-norm"

    def __init__(self, model):
        self.model = model
        config = model.config
        prefix = getattr(model, "base_model_prefix", "model")
        self.base = getattr(model, prefix)
        if not hasattr(model, "score"):
            raise MeasureError(f"{self.model_type}: no `score` head; load a *ForSequenceClassification model")
        self.score = model.score
        self.layers = list(self.base.layers)
        self.n_layers = len(self.layers)
        self.n_heads = config.num_attention_heads
        self.head_dim = self.layers[0].self_attn.o_proj.in_features // self.n_heads
        self.d_model = config.hidden_size
        self.final_norm = self.base.norm
        self.norm_eps = getattr(self.final_norm, "variance_epsilon", getattr(self.final_norm, "eps", 1e-6))
        self._heads_store: list | None = None
        self._hooks = [layer.self_attn.o_proj.register_forward_pre_hook(self._capture_heads)
                       for layer in self.layers]

    # ----- the stream -------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, d): the token embeddings (the stream entering layer 0)."""
        return self.base.embed_tokens(ids)

    read: ClassVar[str] = "token"

    def join(self, i: int, side: str, resid: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """A pre-norm decoder's stream after a sublayer: resid + out."""
        return resid + out

    def score_position(self, lengths: list[int]) -> list[int]:
        """Each sequence's last real token (right padding never reaches it under causal attention)."""
        return [n - 1 for n in lengths]

    def read_out(self, resid: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, d): the stream at each row's scoring token."""
        rows = torch.arange(resid.shape[0], device=resid.device)
        return resid[rows, score_idx]

    def context(self, width: int, lengths: list[int] | None = None):
        """Rotary embeddings and one additive causal mask (1, 1, T, T) per layer, sliding
        windows honoured; both broadcast over rows. Right padding sits after every real token,
        so causal attention never lets it reach one and `lengths` are not needed."""
        param = self.score.weight
        device, dtype = param.device, param.dtype
        positions = torch.arange(width, device=device).unsqueeze(0)
        probe = torch.zeros(1, width, self.d_model, device=device, dtype=dtype)
        rotary = self.base.rotary_emb(probe, positions)
        q = torch.arange(width, device=device)
        masks = []
        for layer in self.layers:
            allowed = q[None, :] <= q[:, None]
            window = getattr(layer.self_attn, "sliding_window", None)
            if window:
                allowed = allowed & (q[:, None] - q[None, :] < window)
            mask = torch.zeros(width, width, device=device, dtype=dtype)
            mask.masked_fill_(~allowed, torch.finfo(dtype).min)
            masks.append(mask[None, None])
        return rotary, masks

    # ----- attention and its heads --------------------------------------------------------------
    def _capture_heads(self, module, args):
        if self._heads_store is not None:
            self._heads_store.append(args[0])
        return None

    def _self_attn(self, i: int, resid: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention module's own output (before any post-attention norm) and its heads."""
        layer = self.layers[i]
        rotary, masks = ctx
        width = resid.shape[1]
        cos, sin = rotary
        self._heads_store = []
        try:
            out = layer.self_attn(hidden_states=layer.input_layernorm(resid),
                                  position_embeddings=(cos[:, :width], sin[:, :width]),
                                  attention_mask=masks[i][..., :width, :width])[0]
            (heads,) = self._heads_store
        finally:
            self._heads_store = None
        return out, heads

    def attn(self, i: int, resid: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i's attention output (o_proj's output) and its heads (o_proj's input)."""
        out, heads = self._self_attn(i, resid, ctx)
        return self._after_attn(i, out), heads

    def _after_attn(self, i: int, out: torch.Tensor) -> torch.Tensor:
        """What joins the stream from the attention module's output (Llama: the output itself)."""
        return out

    def attn_packed(self, i: int, resid: torch.Tensor, packing: Packing, ctx,
                    last_only: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, d) -> (N, d), (N, H*k): layer i's attention output and its heads for sequences
        packed end to end (`measure/models/packed.py`), from the layer's own weights; with
        `last_only`, at each sequence's last token alone (S rows; keys and values still read at
        every token). Equal to `attn` to float rounding, not bit for bit: the committed studies
        never use it."""
        layer = self.layers[i]
        module = layer.self_attn
        rotary, masks = ctx
        cos, sin = (x[0] for x in rotary)  # (T, k)
        if cos.shape[-1] != self.head_dim:
            raise MeasureError(f"{self.model_type}: rotary embeddings over part of a head are not packed")
        width = max(g.gather.shape[1] for g in packing.groups)
        mask = masks[i][..., :width, :width]
        if bool((mask == _causal(width, mask)).all()):
            mask = None  # no sliding window within this width: plain causal
        x = layer.input_layernorm(resid)
        at = packing.ends if last_only else slice(None)
        q = module.q_proj(x[at]).unflatten(-1, (self.n_heads, self.head_dim))
        k = module.k_proj(x).unflatten(-1, (-1, self.head_dim))
        v = module.v_proj(x).unflatten(-1, (-1, self.head_dim))
        if getattr(module, "q_norm", None) is not None:  # Qwen3: RMS norms on each head of q and k
            q, k = module.q_norm(q), module.k_norm(k)
        positions = packing.positions
        q = _rotate(q, cos[positions[at]], sin[positions[at]])
        k = _rotate(k, cos[positions], sin[positions])
        out = attend(q, k, v, packing, mask, module.scaling, getattr(module, "attn_logit_softcapping", None),
                     last_only)
        heads = out.flatten(1)
        return self._after_attn(i, module.o_proj(heads)), heads

    def attn_from_heads(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """The attention output from (patched) heads: o_proj applied to them."""
        return self.layers[i].self_attn.o_proj(heads)

    def head_writes(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """(..., H*k) -> (..., H, d): o_proj's columns of each head applied to its slice."""
        weight = self.layers[i].self_attn.o_proj.weight
        zs = heads.reshape(*heads.shape[:-1], self.n_heads, self.head_dim)
        w = weight.reshape(weight.shape[0], self.n_heads, self.head_dim)
        return torch.einsum("...hk,dhk->...hd", zs.float(), w.float())

    # ----- the MLP --------------------------------------------------------------------------------
    def mlp(self, i: int, resid_mid: torch.Tensor) -> torch.Tensor:
        """Layer i's MLP output on the normalised mid-layer stream."""
        layer = self.layers[i]
        return layer.mlp(layer.post_attention_layernorm(resid_mid))

    def hook_points(self, i: int) -> HookPoints:
        """The modules the naive hooks loop patches: self_attn, mlp, and o_proj's input for heads."""
        layer = self.layers[i]
        return HookPoints(attn=layer.self_attn, mlp=layer.mlp, heads=layer.self_attn.o_proj)

    # ----- the final norm -------------------------------------------------------------------------
    def norm_gain(self) -> torch.Tensor:
        """(d,) the elementwise gain g of the final RMS norm, norm(x) = g * x / rms(x)."""
        return self.final_norm.weight.detach().float()


class LlamaFamily(DecoderFamily):
    model_type = "llama"


class MistralFamily(DecoderFamily):
    """Llama's layer; some configs set a sliding window, which `context` honours."""
    model_type = "mistral"


class Qwen2Family(DecoderFamily):
    """Llama's layer with biased q/k/v projections (inside the attention module)."""
    model_type = "qwen2"


class Qwen3Family(DecoderFamily):
    """Llama's layer with RMS norms on q and k (inside the attention module) and its own head_dim."""
    model_type = "qwen3"


class Gemma2Family(DecoderFamily):
    """Gemma2: norms after attention and around the MLP, RMS norm gains stored as (1 + w),
    scaled embeddings (inside embed_tokens), alternating sliding-window layers."""
    model_type = "gemma2"

    def norm_gain(self) -> torch.Tensor:
        """(d,) the final norm's gain, stored as w and applied as 1 + w."""
        return self.final_norm.weight.detach().float() + 1.0

    def _after_attn(self, i: int, out: torch.Tensor) -> torch.Tensor:
        """The attention output joins the stream through the post-attention norm."""
        return self.layers[i].post_attention_layernorm(out)

    def attn_from_heads(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """The attention output from (patched) heads: o_proj, then the post-attention norm."""
        layer = self.layers[i]
        return layer.post_attention_layernorm(layer.self_attn.o_proj(heads))

    def head_writes(self, i: int, heads: torch.Tensor) -> torch.Tensor:
        """The post-attention norm follows o_proj; its scale is frozen at the clean value so
        the head writes still add up to the attention output."""
        writes = super().head_writes(i, heads)
        layer = self.layers[i]
        raw = layer.self_attn.o_proj(heads).float()
        post = layer.post_attention_layernorm
        scale = torch.rsqrt(raw.pow(2).mean(-1, keepdim=True) + post.eps) * (1 + post.weight.float())
        return writes * scale.unsqueeze(-2)

    def mlp(self, i: int, resid_mid: torch.Tensor) -> torch.Tensor:
        """Layer i's MLP output between its pre- and post-feedforward norms."""
        layer = self.layers[i]
        return layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(resid_mid)))

    def hook_points(self, i: int) -> HookPoints:
        """The modules the naive hooks loop patches: the two post norms, and o_proj's input for heads."""
        layer = self.layers[i]
        return HookPoints(attn=layer.post_attention_layernorm, mlp=layer.post_feedforward_layernorm,
                          heads=layer.self_attn.o_proj)
