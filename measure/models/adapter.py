"""One adapter over reward models: components, reward direction, final norm, cached runs.

The adapter is written once for every architecture; where an architecture keeps its parts
(attention and MLP outputs, norms, heads, final norm, score head) is its family object's business
(`measure/models/families.py`, a registry keyed by `config.model_type`). The adapter drives the model's
own submodules layer by layer, so a patched run can resume from the input of the patched layer.

Components: `embed`, `attn_L{i}`, `head_L{i}_H{j}`, `mlp_L{i}`. A head's output is its slice of
the o_proj input (`heads_L{i}` in the cache); its write to the residual stream is the o_proj
columns of that slice applied to it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download: local paths or an existing cache

import torch

from measure.models.cache import ActivationCache
from measure.errors import MeasureError
from measure.models.registry import FAMILIES, family_for, supported
from measure.runner.jsonio import read_json


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
    read: str = "token"   # "token": at score_idx; "pooled": mean over positions 0..score_idx


def encode_pair(tokenizer, prompt: str, response: str) -> list[int]:
    """Token ids of one side of a pair: the tokenizer's chat template (a user turn, then an
    assistant turn) when it has one, else prompt and response joined by a blank line."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
            tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    return list(tokenizer(prompt + "\n\n" + response)["input_ids"])


class Adapter:
    """A loaded reward model: its family object, tokenizer, reward direction and linearised final
    norm, and the layer-by-layer forward pass that the instruments resume from."""

    def __init__(self, model, tokenizer, model_id: str, objective: int = 0, path: Path | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.path = path
        self.family = family_for(model, model_id)
        family = self.family
        self.base, self.layers = family.base, family.layers
        self.n_layers, self.n_heads, self.head_dim = family.n_layers, family.n_heads, family.head_dim
        self.hidden = family.d_model
        score = family.score
        n_labels = score.weight.shape[0]
        if not 0 <= objective < n_labels:
            raise MeasureError(f"{model_id}: objective {objective} out of range (score has {n_labels} rows)")
        self.objective = objective
        self.w_r = score.weight[objective].detach()                       # (d,)
        bias = score.bias
        self.score_bias = float(bias[objective].detach()) if bias is not None else 0.0
        self.final_norm = family.final_norm
        self.dtype = self.w_r.dtype
        self.device = self.w_r.device
        # a post-norm family has no final norm: its last layer's output is read directly
        self.gain = self._checked_gain() if self.final_norm is not None else None   # (d,)
        self._row_dirs: tuple[torch.Tensor, torch.Tensor] | None = None

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
    def _checked_gain(self) -> torch.Tensor:
        """The family's gain g of the final norm, checked on a probe against the module itself."""
        gain = self.family.norm_gain()
        probe = torch.randn(3, gain.shape[0], generator=torch.Generator().manual_seed(0))
        expected = gain * probe * self.inv_rms(probe)
        got = self.final_norm(probe.to(self.device, self.dtype)).float().cpu()
        if not torch.allclose(got, expected.cpu(), rtol=2e-2, atol=2e-2):
            raise MeasureError(f"{self.model_id}: the final norm is not the RMS norm its family "
                               f"({self.family.model_type}) describes")
        return gain.to(self.device)

    def inv_rms(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d) -> (..., 1): 1 / rms(x), with the final norm's epsilon."""
        x = x.float()
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.family.norm_eps)

    def project(self, writes: torch.Tensor, inv_rms: torch.Tensor) -> torch.Tensor:
        """Writes (B, ..., d) at the scoring token -> (B, ...) reward units, final-norm scale
        frozen, along each row's direction."""
        scaled = (writes.float() * inv_rms) * self.gain.float()
        if self._row_dirs is None:
            return scaled @ self.w_r.float()  # one direction: a matrix product, as always measured
        dirs = self.directions(writes.shape[0])[0]
        return (scaled * dirs.reshape(dirs.shape[0], *([1] * (scaled.dim() - 2)), dirs.shape[1])).sum(-1)

    def set_directions(self, directions: torch.Tensor | None, biases: torch.Tensor | None = None) -> None:
        """Read row b of every later batch along its own reward direction (B, d) and bias (B,):
        a pair's own objective head, or a gated aggregate. Patched runs stack variants of the
        batch, so row n reads direction n mod B. `None` goes back to the score row `w_r`."""
        self._row_dirs = None if directions is None else (
            directions.to(self.device).float(), biases.to(self.device).float())

    def directions(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, d), (rows,): each row's reward direction and bias."""
        if self._row_dirs is None:
            return (self.w_r.float().expand(rows, -1),
                    torch.full((rows,), self.score_bias, device=self.device))
        dirs, bias = self._row_dirs
        if rows % dirs.shape[0]:
            raise MeasureError(f"{self.model_id}: {rows} rows do not tile the {dirs.shape[0]} row directions set")
        idx = torch.arange(rows, device=self.device) % dirs.shape[0]
        return dirs[idx], bias[idx]

    def reward_of(self, resid: torch.Tensor) -> torch.Tensor:
        """(N, d) -> (N,): the reward of read-out vectors (the real final norm if the family has
        one, then each row's direction)."""
        x = self.final_norm(resid) if self.final_norm is not None else resid
        if self._row_dirs is None:
            # one direction: a matrix product, as the committed bundles were measured (an
            # elementwise product and sum rounds differently in the last digits)
            return x.float() @ self.w_r.float() + self.score_bias
        dirs, bias = self.directions(x.shape[0])
        return (x.float() * dirs).sum(-1) + bias

    # ----- inputs ---------------------------------------------------------------------------
    def encode(self, prompt: str, response: str, where: str = "input") -> list[int]:
        """Token ids of one side of a pair (see `encode_pair`); `where` names it in errors."""
        try:
            return encode_pair(self.tokenizer, prompt, response)
        except Exception as exc:  # the tokenizer's own error, made to name the input and word
            raise MeasureError(f"{where}: {self._untokenizable(prompt + ' ' + response) or exc}") from None

    def _untokenizable(self, text: str) -> str | None:
        for word in text.split():
            try:
                self.tokenizer(word)
            except Exception:
                return f"word {word!r} is not in the tokenizer's vocabulary ({self.path or self.model_id})"
        return None

    def batch(self, sequences: list[list[int]]) -> Batch:
        """The sequences right-padded into one batch, with each one's length and scoring position."""
        width = max(len(s) for s in sequences)
        pad = getattr(self.model.config, "pad_token_id", None) or 0
        ids = torch.full((len(sequences), width), int(pad), dtype=torch.long)
        for b, seq in enumerate(sequences):
            ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        lengths = [len(s) for s in sequences]
        idx = torch.tensor(self.family.score_position(lengths), dtype=torch.long)
        return Batch(ids.to(self.device), idx.to(self.device), lengths, self.family.read)

    # ----- the layer-by-layer forward -------------------------------------------------------
    def context(self, width: int, lengths: list[int] | None = None):
        """What every layer needs besides the stream; `lengths` (the batch's real lengths) for a
        family that masks padding (an encoder attends both ways)."""
        return self.family.context(width, lengths)

    @torch.no_grad()
    def clean_run(self, batch: Batch) -> ActivationCache:
        """One clean pass of the batch, every component's output and the stream at each layer boundary cached."""
        family = self.family
        ctx = family.context(batch.ids.shape[1], batch.lengths)
        resid = family.embed(batch.ids)
        run = ActivationCache(self, batch, embed=resid)
        for i in range(self.n_layers):
            run.resid_pre.append(resid)
            attn, heads = family.attn(i, resid, ctx)
            resid = family.join(i, "attn", resid, attn)
            run.attn.append(attn)
            run.heads.append(heads)
            run.resid_mid.append(resid)
            mlp = family.mlp(i, resid)
            resid = family.join(i, "mlp", resid, mlp)
            run.mlp.append(mlp)
            run.resid_post.append(resid)
        run.reward = self.reward_at(resid, batch.score_idx)
        return run

    def reward_at(self, resid: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
        """(B, T, d), (B,) -> (B,): the reward at each row's scoring position (its scoring
        token, or the mean over its real tokens for a pooled family)."""
        return self.reward_of(self.family.read_out(resid, score_idx))

    def readout_at(self, resid: torch.Tensor, score_idx: torch.Tensor) -> torch.Tensor:
        """(B, T, d), (B,) -> (B, d) float32: what the reward head reads, after the final norm if
        the family has one; its product with a direction, plus the bias, is the reward along it."""
        x = self.family.read_out(resid, score_idx)
        return (self.final_norm(x) if self.final_norm is not None else x).float()

    def continue_from(self, resid: torch.Tensor, layer: int, after: str, ctx,
                      counter: dict | None = None) -> torch.Tensor:
        """Finish the forward pass from the residual stream right after `after` ('attn' or
        'mlp') of `layer`; returns the final residual stream."""
        family = self.family
        start = layer + 1
        if after == "attn":
            resid = family.join(layer, "mlp", resid, family.mlp(layer, resid))
            count_layer_evals(counter, resid.shape[0], 0.5)
        for i in range(start, self.n_layers):
            resid = family.join(i, "attn", resid, family.attn(i, resid, ctx)[0])
            resid = family.join(i, "mlp", resid, family.mlp(i, resid))
            count_layer_evals(counter, resid.shape[0], 1.0)
        return resid


def count_layer_evals(counter: dict | None, rows: int, layers: float) -> None:
    """Layer evaluations: one sequence through one decoder layer counts 1 (a half layer 0.5)."""
    if counter is not None:
        counter["layer_evals"] = counter.get("layer_evals", 0.0) + rows * layers


def check_device_dtype(device: str, dtype_name: str) -> tuple[torch.device, torch.dtype]:
    """The torch device and dtype named, checked to exist and to run a forward pass's operations."""
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


def resolve_model_path(spec: str, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A named model of this repository (`measure.studies.NAMED_MODELS`), a local folder, or a
    hub id already in the local cache (never downloaded; `cache_dir` overrides the default
    Hugging Face cache)."""
    from measure.studies import NAMED_MODELS, named_model

    named = named_model(spec)
    if named is not None:
        return named, spec
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
            f"--model {spec!r}: not a named model ({', '.join(NAMED_MODELS)}), not a local folder, and not "
            f"in the local Hugging Face cache (downloads are off; fetch it first or pass its folder)") from None


PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")  # weight files that are Python pickles


def refuse_pickled_weights(folder: Path) -> None:
    """Only safetensors weights are loaded: a pickle can run code when it is read, and a folder
    whose weights are pickled is refused in one line, before anything opens it."""
    if any(folder.glob("*.safetensors")):
        return
    pickled = sorted(p.name for pattern in PICKLED for p in folder.glob(pattern))
    if pickled:
        raise MeasureError(f"{folder / pickled[0]}: pickled weights are never loaded (unpickling can run "
                           f"code); convert them to safetensors")
    raise MeasureError(f"{folder}: no *.safetensors weights")


def load(spec: str, device: str = "cpu", dtype: str = "float32", objective: int = 0,
         cache_dir: Path | None = None) -> Adapter:
    """Load a sequence-classification reward model by name/path through one code path."""
    dev, torch_dtype = check_device_dtype(device, dtype)
    path, model_id = resolve_model_path(spec, cache_dir)
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own tqdm bar reports progress

    config_file = path / "config.json"
    if not config_file.exists():
        raise MeasureError(f"{config_file}: missing; is {path} a Hugging Face model folder?")
    if not isinstance(read_json(config_file, "model config"), dict):  # bounded: size, UTF-8, depth
        raise MeasureError(f"{config_file}: the model config is not a JSON object")
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
    except (ValueError, KeyError) as exc:
        raise MeasureError(f"{config_file}: unknown model or architecture ({exc})") from None
    if config.model_type not in FAMILIES:
        raise MeasureError(f"{config_file}: architecture {config.model_type!r} is not supported; "
                           f"supported: {supported()}")
    refuse_pickled_weights(path)
    # a family whose reward models are not *ForSequenceClassification classes loads its own
    loader = getattr(FAMILIES[config.model_type], "load_model", AutoModelForSequenceClassification.from_pretrained)
    try:
        model = loader(path, local_files_only=True, dtype=torch_dtype, attn_implementation="eager",
                       use_safetensors=True).to(dev)
    except Exception as exc:  # a broken or mismatched weights file, whatever the loader raises for it
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise MeasureError(f"{path}: the model's weights do not load ({type(exc).__name__}: {first})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise MeasureError(f"{path}: no tokenizer ({exc})") from None
    return Adapter(model, tokenizer, model_id, objective, path)
