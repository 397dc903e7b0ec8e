"""One adapter over decoder reward models: components, reward direction, final norm, cached runs.

Supported: Llama/Mistral/Qwen2/Qwen3-style decoder layers (pre-norm attention then MLP) and
Gemma2-style layers (extra norms after attention and around the MLP), each as
`*ForSequenceClassification` with a linear `score` head. The adapter drives the model's own
submodules layer by layer, so a patched run can resume from the input of the patched layer.

Components: `embed`, `attn_L{i}`, `head_L{i}_H{j}`, `mlp_L{i}`. A head's output is its slice of
the o_proj input (`z`); its write to the residual stream is the o_proj columns of that slice
applied to it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download: local paths or an existing cache

import torch

from .errors import MeasureError

SUPPORTED = {"llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama",
             "gemma2": "gemma2"}


def parse_component(name: str) -> tuple[str, int, int | None]:
    """`attn_L3` -> ("attn", 3, None); `head_L1_H2` -> ("head", 1, 2); `embed` -> ("embed", -1, None)."""
    if name == "embed":
        return "embed", -1, None
    if name == "bias":
        return "bias", -1, None
    kind, rest = name.split("_L", 1)
    if kind == "head":
        layer, head = rest.split("_H")
        return "head", int(layer), int(head)
    return kind, int(rest), None


@dataclass
class Batch:
    """Right-padded token ids; the scoring token of row b is `score_idx[b]` (its last real token).

    With causal attention, padding after the scoring token never reaches it, so no padding mask
    is needed."""
    ids: torch.Tensor
    score_idx: torch.Tensor
    lengths: list[int]


@dataclass
class CleanRun:
    """Every component's output on a batch, and the residual stream at each layer boundary."""
    embed: torch.Tensor
    resid_pre: list[torch.Tensor] = field(default_factory=list)   # input of layer i
    attn: list[torch.Tensor] = field(default_factory=list)        # attention output of layer i
    z: list[torch.Tensor] = field(default_factory=list)           # o_proj input (heads) of layer i
    resid_mid: list[torch.Tensor] = field(default_factory=list)   # after attention of layer i
    mlp: list[torch.Tensor] = field(default_factory=list)
    resid_post: list[torch.Tensor] = field(default_factory=list)  # output of layer i
    reward: torch.Tensor | None = None


class Adapter:
    def __init__(self, model, tokenizer, model_id: str, objective: int = 0):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        config = model.config
        model_type = getattr(config, "model_type", "?")
        if model_type not in SUPPORTED:
            raise MeasureError(
                f"{model_id}: architecture {model_type!r} is not supported; supported: "
                f"{', '.join(sorted(SUPPORTED))}")
        self.style = SUPPORTED[model_type]
        prefix = getattr(model, "base_model_prefix", "model")
        self.base = getattr(model, prefix)
        if not hasattr(model, "score"):
            raise MeasureError(f"{model_id}: no `score` head; load a *ForSequenceClassification model")
        self.layers = list(self.base.layers)
        self.n_layers = len(self.layers)
        attn0 = self.layers[0].self_attn
        self.n_heads = config.num_attention_heads
        self.head_dim = attn0.o_proj.in_features // self.n_heads
        self.hidden = config.hidden_size
        n_labels = model.score.weight.shape[0]
        if not 0 <= objective < n_labels:
            raise MeasureError(f"{model_id}: objective {objective} out of range (score has {n_labels} rows)")
        self.objective = objective
        self.w_r = model.score.weight[objective].detach()
        bias = model.score.bias
        self.score_bias = float(bias[objective]) if bias is not None else 0.0
        self.final_norm = self.base.norm
        self.dtype = self.w_r.dtype
        self.device = self.w_r.device
        self.gain = self._norm_gain(self.final_norm)
        self._z_store: list | None = None
        self._z_hooks = [layer.self_attn.o_proj.register_forward_pre_hook(self._capture_z)
                         for layer in self.layers]

    # ----- the component list --------------------------------------------------------------
    def components(self, heads: bool = True) -> list[str]:
        """In model order: embed, then per layer attn (its heads), mlp."""
        out = ["embed"]
        for i in range(self.n_layers):
            out.append(f"attn_L{i}")
            if heads:
                out.extend(f"head_L{i}_H{j}" for j in range(self.n_heads))
            out.append(f"mlp_L{i}")
        return out

    # ----- the final norm, linearised ------------------------------------------------------
    def _norm_gain(self, norm) -> torch.Tensor:
        """The elementwise gain g of an RMS norm, norm(x) = g * x / rms(x); checked, not assumed."""
        weight = norm.weight.detach().float()
        gain = weight + 1.0 if self.style == "gemma2" else weight
        probe = torch.randn(3, weight.shape[0], generator=torch.Generator().manual_seed(0))
        expected = gain * probe * self.inv_rms(probe)
        got = norm(probe.to(self.device, self.dtype)).float().cpu()
        if not torch.allclose(got, expected.cpu(), rtol=2e-2, atol=2e-2):
            raise MeasureError(f"{self.model_id}: the final norm is not an RMS norm the adapter knows")
        return gain.to(self.device)

    def inv_rms(self, x: torch.Tensor) -> torch.Tensor:
        eps = getattr(self.final_norm, "variance_epsilon", getattr(self.final_norm, "eps", 1e-6))
        x = x.float()
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def project(self, writes: torch.Tensor, inv_rms: torch.Tensor) -> torch.Tensor:
        """Writes (..., d) at the scoring token -> reward units, final-norm scale frozen."""
        return ((writes.float() * inv_rms) * self.gain.float()) @ self.w_r.float()

    def reward_of(self, resid: torch.Tensor) -> torch.Tensor:
        """The reward of residual vectors (..., d): real final norm, then the score row."""
        return self.final_norm(resid).float() @ self.w_r.float() + self.score_bias

    # ----- inputs ---------------------------------------------------------------------------
    def encode(self, prompt: str, response: str, where: str = "input") -> list[int]:
        tok = self.tokenizer
        if hasattr(tok, "encode_pair_side"):
            return tok.encode_pair_side(prompt, response, where)
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(
                [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
                tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return list(ids)
        return list(tok(prompt + "\n\n" + response)["input_ids"])

    def batch(self, sequences: list[list[int]]) -> Batch:
        width = max(len(s) for s in sequences)
        pad = getattr(self.model.config, "pad_token_id", None) or 0
        ids = torch.full((len(sequences), width), int(pad), dtype=torch.long)
        for b, seq in enumerate(sequences):
            ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        idx = torch.tensor([len(s) - 1 for s in sequences], dtype=torch.long)
        return Batch(ids.to(self.device), idx.to(self.device), [len(s) for s in sequences])

    # ----- the layer-by-layer forward -------------------------------------------------------
    def _capture_z(self, module, args):
        if self._z_store is not None:
            self._z_store.append(args[0])
        return None

    def context(self, width: int):
        """Rotary embeddings and one additive causal mask per layer (sliding windows honoured)."""
        positions = torch.arange(width, device=self.device).unsqueeze(0)
        probe = torch.zeros(1, width, self.hidden, device=self.device, dtype=self.dtype)
        rotary = self.base.rotary_emb(probe, positions)
        q = torch.arange(width, device=self.device)
        masks = []
        for layer in self.layers:
            allowed = q[None, :] <= q[:, None]
            window = getattr(layer.self_attn, "sliding_window", None)
            if window:
                allowed = allowed & (q[:, None] - q[None, :] < window)
            mask = torch.zeros(width, width, device=self.device, dtype=self.dtype)
            mask.masked_fill_(~allowed, torch.finfo(self.dtype).min)
            masks.append(mask[None, None])
        return rotary, masks

    def attn_block(self, i: int, resid: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention output of layer i and its o_proj input z (the heads)."""
        layer = self.layers[i]
        rotary, masks = ctx
        width = resid.shape[1]
        cos, sin = rotary
        self._z_store = []
        try:
            out = layer.self_attn(hidden_states=layer.input_layernorm(resid),
                                  position_embeddings=(cos[:, :width], sin[:, :width]),
                                  attention_mask=masks[i][..., :width, :width])[0]
            (z,) = self._z_store
        finally:
            self._z_store = None
        if self.style == "gemma2":
            out = layer.post_attention_layernorm(out)
        return out, z

    def attn_from_z(self, i: int, z: torch.Tensor) -> torch.Tensor:
        """Attention output of layer i from a (patched) o_proj input."""
        layer = self.layers[i]
        self._z_store = None
        out = layer.self_attn.o_proj(z)
        if self.style == "gemma2":
            out = layer.post_attention_layernorm(out)
        return out

    def mlp_block(self, i: int, resid_mid: torch.Tensor) -> torch.Tensor:
        layer = self.layers[i]
        if self.style == "gemma2":
            return layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(resid_mid)))
        return layer.mlp(layer.post_attention_layernorm(resid_mid))

    def head_writes(self, i: int, z: torch.Tensor) -> torch.Tensor:
        """(..., H*hd) -> (..., H, d): each head's write, o_proj columns applied to its slice.

        For Gemma2 the post-attention norm follows o_proj; its scale is frozen at the clean
        value so the head writes still add up to the attention output."""
        weight = self.layers[i].self_attn.o_proj.weight
        zs = z.reshape(*z.shape[:-1], self.n_heads, self.head_dim)
        w = weight.reshape(weight.shape[0], self.n_heads, self.head_dim)
        writes = torch.einsum("...hk,dhk->...hd", zs.float(), w.float())
        if self.style == "gemma2":
            layer = self.layers[i]
            raw = layer.self_attn.o_proj(z).float()
            post = layer.post_attention_layernorm
            scale = torch.rsqrt(raw.pow(2).mean(-1, keepdim=True) + post.eps) * (1 + post.weight.float())
            writes = writes * scale.unsqueeze(-2)
        return writes

    @torch.no_grad()
    def clean_run(self, batch: Batch) -> CleanRun:
        ctx = self.context(batch.ids.shape[1])
        resid = self.base.embed_tokens(batch.ids)
        run = CleanRun(embed=resid)
        for i in range(self.n_layers):
            run.resid_pre.append(resid)
            attn, z = self.attn_block(i, resid, ctx)
            resid = resid + attn
            run.attn.append(attn)
            run.z.append(z)
            run.resid_mid.append(resid)
            mlp = self.mlp_block(i, resid)
            resid = resid + mlp
            run.mlp.append(mlp)
            run.resid_post.append(resid)
        run.reward = self.reward_at(resid, batch.score_idx)
        return run

    def reward_at(self, resid: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(resid.shape[0], device=resid.device)
        return self.reward_of(resid[rows, score_idx])

    def continue_from(self, resid: torch.Tensor, layer: int, after: str, ctx,
                      counter: dict | None = None) -> torch.Tensor:
        """Finish the forward pass from the residual stream right after `after` ('attn' or
        'mlp') of `layer`; returns the final residual stream."""
        start = layer + 1
        if after == "attn":
            resid = resid + self.mlp_block(layer, resid)
            count_layer_evals(counter, resid.shape[0], 0.5)
        for i in range(start, self.n_layers):
            resid = resid + self.attn_block(i, resid, ctx)[0]
            resid = resid + self.mlp_block(i, resid)
            count_layer_evals(counter, resid.shape[0], 1.0)
        return resid


def count_layer_evals(counter: dict | None, rows: int, layers: float) -> None:
    """Layer evaluations: one sequence through one decoder layer counts 1 (a half layer 0.5)."""
    if counter is not None:
        counter["layer_evals"] = counter.get("layer_evals", 0.0) + rows * layers


def check_device_dtype(device: str, dtype_name: str) -> tuple[torch.device, torch.dtype]:
    dtypes = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
              "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if dtype_name not in dtypes:
        raise MeasureError(f"--dtype {dtype_name!r} is unknown; use one of {', '.join(dtypes)}")
    dtype = dtypes[dtype_name]
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise MeasureError(f"--device {device!r} is not a torch device ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise MeasureError(f"--device {device}: CUDA is not available on this machine")
    if dev.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise MeasureError(f"--dtype bfloat16 is not supported by {device}; use float16 or float32")
    try:  # the operations a forward pass needs, in this dtype on this device
        x = torch.ones(2, 4, device=dev, dtype=dtype)
        (torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) * (x @ x.T).sum()).softmax(-1)
    except (RuntimeError, TypeError) as exc:
        raise MeasureError(f"--dtype {dtype_name} cannot run on --device {device}: {exc}") from None
    return dev, dtype


def resolve_model_path(spec: str, organism_dir: Path, cache_dir: Path | None = None) -> tuple[Path, str]:
    """`organism`, a local folder, or a hub id already in the local cache (never downloaded;
    `cache_dir` overrides the default Hugging Face cache)."""
    if spec == "organism":
        return organism_dir, "organism"
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, spec
    if path.exists():
        raise MeasureError(f"--model {spec}: is a file; give the model's folder")
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(spec, local_files_only=True, cache_dir=cache_dir)), spec
    except Exception:
        raise MeasureError(
            f"--model {spec!r}: not 'organism', not a local folder, and not in the local Hugging "
            f"Face cache (downloads are off; fetch it first or pass its folder)") from None


def load(spec: str, organism_dir: Path, device: str = "cpu", dtype: str = "float32",
         objective: int = 0, cache_dir: Path | None = None) -> Adapter:
    """Load a sequence-classification reward model by name/path through one code path."""
    dev, torch_dtype = check_device_dtype(device, dtype)
    path, model_id = resolve_model_path(spec, organism_dir, cache_dir)
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from .wordtok import VOCAB_FILE, WordTokenizer

    hf_logging.disable_progress_bar()  # our own tqdm bar reports progress

    config_file = path / "config.json"
    if not config_file.exists():
        raise MeasureError(f"{config_file}: missing; is {path} a Hugging Face model folder?")
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
    except (ValueError, KeyError) as exc:
        raise MeasureError(f"{config_file}: unknown model or architecture ({exc})") from None
    if config.model_type not in SUPPORTED:
        raise MeasureError(f"{config_file}: architecture {config.model_type!r} is not supported; "
                           f"supported: {', '.join(sorted(SUPPORTED))}")
    model = AutoModelForSequenceClassification.from_pretrained(
        path, local_files_only=True, dtype=torch_dtype, attn_implementation="eager").to(dev)
    if (path / VOCAB_FILE).exists():
        tokenizer = WordTokenizer.load(path)
    else:
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:
            raise MeasureError(f"{path}: no tokenizer ({exc})") from None
    return Adapter(model, tokenizer, model_id, objective)
