"""`python -m measure plan`: the work, memory and wall time of a study, before running it.

The work is counted exactly as the sweep does it (`instruments.patch_sweep`): per shard of
`shard_size` pairs (2 sequences each, right-padded to width T), two clean passes (the stats pass
for the mean activations, and the measuring pass), then per layer i every attention-side variant
(the attn block and each head, in each mode) resumes at layer i's MLP and runs the layers above,
and every MLP variant runs the layers above. A layer evaluation is one sequence through one
decoder layer (the MLP alone counts 0.5), as `adapter.count_layer_evals` counts them.

Wall time comes from one of two sources, always labelled:

- `cpu-measured`: the FLOP rate this machine reaches on the same work: a random-weight model with
  the target's layer shape but two layers is swept (layer 0, every component and mode) on one
  shard of the target's width, timed, and its FLOPs divided by the time. The time is the
  process's CPU time, so other jobs on a shared machine do not skew it; with one thread it is
  the wall time of an idle machine (with more threads, divide by the speed-up you get);
- `gpu-flop-model`: the FLOP model below at a stated peak FLOP rate times a stated efficiency.
  Neither number is measured here; `benchmarks/gpu_smoke.sh` measures the real rate on a GPU.

The FLOP model, per sequence of width T through one layer (d hidden, H heads, G key-value heads,
k head dim, I MLP width): attention 2T(2dHk + 2dGk) + 4T^2Hk (scores and weighted values over the
whole padded square, as eager attention computes them); MLP 6TdI; a head patch adds one o_proj,
2TdHk. Norms, rotary, softmax and the score head are left out (under 2% at 8B shape).

Peak memory per device is modelled, not measured: the weights, one shard's cached clean run (the
embedding plus five tensors per layer: attn, z, mid stream, mlp, output), the activation
statistics (float64), and the largest patch batch in flight (its rows times the activations of
one layer: the resumed streams and their concatenation, norm and block outputs, q/k/v with k and v
expanded to all heads, the attention scores in the dtype plus their float32 softmax, and the
three MLP intermediates). Model load, tokenization and the bundle summary (the seed bootstrap)
are not in the estimate.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from measure import options
from measure.errors import MeasureError

MODES = ("mean", "zero", "swap")
DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}
# Stated, not measured: H100/H200 SXM dense bfloat16 peak from the vendor's datasheet, and an
# assumed fraction of it for this workload (eager attention, one module call at a time).
GPU_PEAK_TFLOPS = 989.0
GPU_EFFICIENCY = 0.30
GPU_MEMORY_GIB = 80.0
GIB = 1 << 30


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    labels: int = 1
    tied: bool = False

    @classmethod
    def from_config(cls, config: dict, where: str = "config") -> "Shape":
        """The sizes of a decoder's `config.json`, each a whole number of at least 1."""
        def size(key: str, default=None) -> int:
            value = config.get(key) if config.get(key) is not None else default
            if value is None:
                raise MeasureError(f"{where}: lacks {key!r}; is it a decoder (Llama-family) config?")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MeasureError(f"{where}: {key} is {value!r}; a size must be a whole number of at least 1")
            return value

        heads, hidden = size("num_attention_heads"), size("hidden_size")
        id2label = config.get("id2label")
        return cls(layers=size("num_hidden_layers"), hidden=hidden, heads=heads,
                   kv_heads=size("num_key_value_heads", heads),
                   head_dim=size("head_dim", hidden // heads or None),
                   intermediate=size("intermediate_size"), vocab=size("vocab_size"),
                   labels=size("num_labels", len(id2label) if isinstance(id2label, dict) and id2label else 1),
                   tied=bool(config.get("tie_word_embeddings", False)))

    def params(self) -> int:
        """The parameter count of a decoder of this shape."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        layer = self.hidden * q + 2 * self.hidden * kv + q * self.hidden + 3 * self.hidden * self.intermediate
        layer += 2 * self.hidden  # two RMS norm gains
        return self.vocab * self.hidden + self.layers * layer + self.hidden + self.labels * self.hidden

    # FLOPs for one sequence of width T
    def attn_flops(self, T: int) -> float:
        """FLOPs of one sequence of width T through one attention block."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 2.0 * T * (2 * self.hidden * q + 2 * self.hidden * kv) + 4.0 * T * T * q

    def mlp_flops(self, T: int) -> float:
        """FLOPs of one sequence of width T through one MLP."""
        return 6.0 * T * self.hidden * self.intermediate

    def o_proj_flops(self, T: int) -> float:
        """FLOPs of one sequence of width T through one o_proj (what a head's patch recomputes)."""
        return 2.0 * T * self.hidden * self.heads * self.head_dim


def read_shape(spec: str) -> tuple[Shape, str]:
    """A named model of this repository (`measure.studies.NAMED_MODELS`), a config.json, a model folder holding one,
    or a cached hub id (config only), as `run --model` takes them."""
    from measure.runner.jsonio import read_json
    from measure.studies import named_model

    path = named_model(spec) or Path(spec).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        try:
            from huggingface_hub import hf_hub_download
            path = Path(hf_hub_download(spec, "config.json", local_files_only=True))
        except Exception:
            raise MeasureError(f"--model {spec!r}: not a config.json, not a folder with one, and not "
                               f"in the local Hugging Face cache") from None
    config = read_json(path, "model config")
    if not isinstance(config, dict):
        raise MeasureError(f"{path}: the model config is not a JSON object")
    return Shape.from_config(config, str(path)), str(path)


def shard_widths(pairs: int, shard_size: int, seq_len: int) -> list[tuple[int, int]]:
    """(pairs in shard, padded width) per shard, every sequence `seq_len` tokens."""
    if pairs <= 0 or shard_size <= 0 or seq_len <= 0:
        raise MeasureError("--pairs, --shard-size and --seq-len must be positive")
    return [(min(shard_size, pairs - s), seq_len) for s in range(0, pairs, shard_size)]


def shard_work(shape: Shape, n_pairs: int, T: int, patch_heads: bool = True, modes=MODES,
               layers_patched: range | None = None, clean_passes: int = 2) -> dict:
    """Layer evaluations ({"clean": n, kind: {mode: n}}) and FLOPs of one shard, as the sweep runs it."""
    B, L = 2 * n_pairs, shape.layers
    attn, mlp, oproj = shape.attn_flops(T), shape.mlp_flops(T), shape.o_proj_flops(T)
    layer = attn + mlp
    evals = {"clean": clean_passes * B * L}
    flops = clean_passes * B * L * layer
    kinds = ("attn", "head", "mlp") if patch_heads else ("attn", "mlp")
    for i in layers_patched if layers_patched is not None else range(L):
        above = L - 1 - i
        for kind in kinds:
            count = shape.heads if kind == "head" else 1
            for mode in modes:
                by_mode = evals.setdefault(kind, {})
                if kind == "mlp":
                    by_mode[mode] = by_mode.get(mode, 0) + count * B * above
                    flops += count * B * above * layer
                else:
                    by_mode[mode] = by_mode.get(mode, 0) + count * B * (above + 0.5)
                    flops += count * B * ((oproj if kind == "head" else 0) + mlp + above * layer)
    return {"layer_evals": evals, "flops": flops}


def work(shape: Shape, shards: list[tuple[int, int]], patch_heads: bool = True) -> dict:
    """Layer evaluations and FLOPs of the whole study (every shard), as the sweep runs it."""
    evals: dict = {}
    flops = 0.0
    per_shard = []
    for n_pairs, T in shards:
        w = shard_work(shape, n_pairs, T, patch_heads)
        for k, v in w["layer_evals"].items():
            if isinstance(v, dict):
                into = evals.setdefault(k, {})
                for mode, n in v.items():
                    into[mode] = into.get(mode, 0) + n
            else:
                evals[k] = evals.get(k, 0) + v
        flops += w["flops"]
        per_shard.append(w["flops"])
    return {"layer_evals": evals, "layer_evals_total": total_evals(evals), "flops": flops,
            "flops_per_shard": per_shard}


def total_evals(evals: dict) -> float:
    """The sum of a work count's layer evaluations."""
    return sum(sum(v.values()) if isinstance(v, dict) else v for v in evals.values())


def memory(shape: Shape, dtype_bytes: int, shard_size: int, T: int, max_rows: int,
           patch_heads: bool = True) -> dict:
    """Peak bytes per device, by part (a model; see the module docstring)."""
    B, d, L = 2 * shard_size, shape.hidden, shape.layers
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    weights = shape.params() * dtype_bytes
    clean = B * T * ((1 + 4 * L) * d + L * q) * dtype_bytes
    stats = 2 * L * (2 * d + q) * 8
    attn_variants = (1 + (shape.heads if patch_heads else 0)) * len(MODES)
    rows = min(max(1, max_rows // B), attn_variants) * B
    base = 6 * d  # resumed streams, their concatenation, normed input, block output, new stream
    attn_phase = rows * T * (base + 2 * q + 2 * kv + 2 * q) * dtype_bytes \
        + rows * shape.heads * T * T * (2 * dtype_bytes + 4)
    mlp_phase = rows * T * (base * dtype_bytes + 3 * shape.intermediate * dtype_bytes)
    patch = max(attn_phase, mlp_phase)
    return {"weights": weights, "clean_run": clean, "stats": stats, "patch_batch": patch,
            "patch_rows": rows, "total": weights + clean + stats + patch}


def measure_cpu_rate(shape: Shape, shard_pairs: int, T: int, max_rows: int, dtype: str = "float32",
                     threads: int = 1, patch_heads: bool = True, repeats: int = 2) -> dict:
    """FLOP/s this machine reaches on the sweep for this layer shape (see the module docstring)."""
    import torch
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    from measure.models.adapter import Adapter, check_device_dtype
    from measure.instruments.patching import StatsAccumulator, patch_sweep

    _dev, torch_dtype = check_device_dtype("cpu", dtype)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                         num_hidden_layers=2, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                         max_position_embeddings=max(T, 64), num_labels=1, pad_token_id=0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    model = model.to(torch_dtype)
    adapter = Adapter(model, None, "calibration")
    B = 2 * shard_pairs
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(1, 64, (T,), generator=gen).tolist() for _ in range(B)]
    batch = adapter.batch(seqs)
    components = ["attn_L0", "mlp_L0"] + ([f"head_L0_H{j}" for j in range(shape.heads)] if patch_heads else [])
    w = shard_work(Shape(**dict(asdict(shape), layers=2)), shard_pairs, T, patch_heads,
                   layers_patched=range(1), clean_passes=1)
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first run warms up and is not counted
            t0 = time.process_time()
            run = adapter.clean_run(batch)
            acc = StatsAccumulator()
            acc.add(adapter, batch, run)
            patch_sweep(adapter, batch, run, acc.finish(), components, MODES, max_rows)
            times.append(time.process_time() - t0)
    seconds = min(times[1:])
    return {"flops": w["flops"], "seconds": seconds, "flops_per_s": w["flops"] / seconds,
            "calibration": f"2-layer random model of this layer shape, one shard of {shard_pairs} "
                           f"pairs at width {T}, layer 0 swept, {dtype}, {threads} thread(s); this "
                           f"process's CPU seconds, best of {repeats} after a warm-up"}


def make_plan(model: str, pairs: int, gpus: int = 0, dtype: str = "bfloat16", seq_len: int = 256,
              shard_size: int = 8, max_rows: int = 512, patch_heads: bool = True,
              gpu_tflops: float = GPU_PEAK_TFLOPS, efficiency: float = GPU_EFFICIENCY,
              gpu_memory_gib: float = GPU_MEMORY_GIB, threads: int = 1,
              shards: list[tuple[int, int]] | None = None, cpu_rate: dict | None = None) -> dict:
    """The plan as a dict; `gpus` 0 plans for this machine's CPU (measuring its rate)."""
    if dtype not in DTYPE_BYTES:
        raise MeasureError(f"--dtype {dtype!r} is unknown; use one of {', '.join(DTYPE_BYTES)}")
    if gpus < 0:
        raise MeasureError("--gpus must be 0 (this CPU) or more")
    shape, source = read_shape(model) if isinstance(model, str) else (model, "given shape")
    shards = shards or shard_widths(pairs, shard_size, seq_len)
    w = work(shape, shards, patch_heads)
    widest = max(T for _n, T in shards)
    mem = memory(shape, DTYPE_BYTES[dtype], shard_size, widest, max_rows, patch_heads)
    devices = max(gpus, 1)
    # shards go to devices whole: the busiest device gets the ceiling share, largest first
    # the stats pass (one clean pass over every shard) runs on the driver's device; the shards
    # then go to devices whole, largest first, each to the least loaded
    stats_pass = [shard_work(shape, n, T, patch_heads, layers_patched=range(0), clean_passes=1)["flops"]
                  for n, T in shards]
    loads = [sum(stats_pass)] + [0.0] * (devices - 1)
    for f in sorted((f - c for f, c in zip(w["flops_per_shard"], stats_pass)), reverse=True):
        loads[loads.index(min(loads))] += f
    busiest = max(loads)
    if gpus:
        rate = gpu_tflops * 1e12 * efficiency
        time_source = {"source": "gpu-flop-model",
                       "statement": f"FLOP model at {gpu_tflops:g} TFLOP/s peak (stated, H100/H200 "
                                    f"SXM dense bfloat16 datasheet) x {efficiency:g} efficiency "
                                    f"(assumed, not measured)",
                       "flops_per_s_per_device": rate}
    else:
        cal = cpu_rate or measure_cpu_rate(shape, shard_size, widest, max_rows,
                                           "float32" if dtype in ("float32", "fp32") else dtype,
                                           threads, patch_heads)
        rate = cal["flops_per_s"]
        time_source = {"source": "cpu-measured", "statement": "FLOP rate measured on this machine: "
                       + cal["calibration"], "flops_per_s_per_device": rate}
    seconds = busiest / rate
    return {
        "model": str(model), "config": source, "shape": asdict(shape), "params": shape.params(),
        "dtype": dtype, "pairs": sum(n for n, _ in shards), "shards": len(shards),
        "shard_size": shard_size, "seq_len": widest, "max_rows": max_rows, "patch_heads": patch_heads,
        "devices": devices, "device_kind": "gpu" if gpus else "cpu",
        "layer_evals": w["layer_evals"], "layer_evals_total": w["layer_evals_total"],
        "flops_total": w["flops"],
        "memory_per_device_gib": {k: (v / GIB if k != "patch_rows" else v) for k, v in mem.items()},
        "fits": (mem["total"] / GIB <= gpu_memory_gib) if gpus else None,
        "device_memory_gib": gpu_memory_gib if gpus else None,
        "time": dict(time_source, busiest_device_flops=busiest, wall_time_s=seconds,
                     wall_time_h=seconds / 3600),
        "excluded": "model load, tokenization, the bundle summary and its seed bootstrap",
    }


def format_plan(p: dict) -> str:
    """The plan as the text `measure plan` prints."""
    s = p["shape"]
    lines = [f"plan for {p['model']} ({p['config']}): {s['layers']} layers, hidden {s['hidden']}, "
             f"{s['heads']} heads ({s['kv_heads']} KV), MLP {s['intermediate']}, {p['params'] / 1e9:.2f} B params",
             f"{p['pairs']} pairs in {p['shards']} shards of {p['shard_size']}, width {p['seq_len']} tokens, "
             f"{p['dtype']}, {p['devices']} {p['device_kind']}(s); heads patched: {p['patch_heads']}",
             "", "work (layer evaluations: one sequence through one decoder layer; MLP alone 0.5)"]
    lines.append(f"  {'kind':8}" + "".join(f"{m:>16}" for m in MODES))
    for kind, by_mode in p["layer_evals"].items():
        if kind != "clean":
            lines.append(f"  {kind:8}" + "".join(f"{by_mode[m]:>16,.0f}" for m in MODES))
    lines.append(f"  {'clean':8}{p['layer_evals']['clean']:>16,.0f}  (stats pass + measuring pass)")
    lines.append(f"  total {p['layer_evals_total']:,.0f} layer evaluations, {p['flops_total']:.3e} FLOPs")
    m = p["memory_per_device_gib"]
    lines += ["", "peak memory per device (modelled)",
              f"  weights {m['weights']:.2f} GiB, cached clean run {m['clean_run']:.2f} GiB, "
              f"stats {m['stats']:.3f} GiB, patch batch ({m['patch_rows']:.0f} rows) {m['patch_batch']:.2f} GiB",
              f"  total {m['total']:.2f} GiB" + (f" of {p['device_memory_gib']:g} GiB: "
                                                  f"{'fits' if p['fits'] else 'DOES NOT FIT (lower --max-rows)'}"
                                                  if p["fits"] is not None else "")]
    t = p["time"]
    lines += ["", f"wall time estimate [{t['source']}]: {t['statement']}",
              f"  {t['flops_per_s_per_device'] / 1e9:,.1f} GFLOP/s per device; busiest device "
              f"{t['busiest_device_flops']:.3e} FLOPs -> {t['wall_time_s']:,.1f} s ({t['wall_time_h']:.2f} h)",
              f"  not included: {p['excluded']}"]
    return "\n".join(lines)


def add_arguments(parser) -> None:
    """The options of `python -m measure plan`, each checked as it is parsed (`measure.options`)."""
    parser.add_argument("--model", required=True,
                        help="'organism', a config.json, a model folder, or a cached hub id")
    parser.add_argument("--pairs", type=options.count, default=None,
                        help="preference pairs in the study (not with --study, whose definition knows its pairs)")
    parser.add_argument("--study", type=options.study_name, default=None,
                        help="a study with its own estimate (its definition's pairs, shards and grid; one "
                             "shard of it timed on this machine), e.g. realprefs")
    parser.add_argument("--max-pairs", type=options.count, default=None,
                        help="with --study: at most this many pairs per dimension (default: the study's)")
    parser.add_argument("--gpus", type=options.whole, default=0, help="GPUs (0: plan for this machine's CPU)")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPE_BYTES))
    parser.add_argument("--seq-len", type=options.count, default=256, help="padded tokens per sequence (assumed)")
    parser.add_argument("--shard-size", type=options.count, default=8)
    parser.add_argument("--max-rows", type=options.count, default=512)
    parser.add_argument("--no-head-patching", action="store_true")
    parser.add_argument("--gpu-tflops", type=options.positive, default=GPU_PEAK_TFLOPS, help="stated peak per GPU")
    parser.add_argument("--efficiency", type=options.fraction, default=GPU_EFFICIENCY,
                        help="assumed fraction of peak")
    parser.add_argument("--gpu-memory-gib", type=options.positive, default=GPU_MEMORY_GIB)
    parser.add_argument("--threads", type=options.threads, default=1)
    parser.add_argument("--json", type=options.output_file, default=None, help="also write the plan as JSON here")


def run_from_args(args) -> int:
    """`python -m measure plan`: print the plan (and write it as JSON with --json); exit status."""
    if args.study is not None:
        from measure.runner.config import StudyConfig
        from measure.runner.definition import definition_for

        status = definition_for(args.study).estimate(StudyConfig(
            model=args.model, study=args.study, max_pairs=args.max_pairs, shard_size=args.shard_size,
            max_rows=args.max_rows, threads=args.threads, progress=False), args.json)
        if status is None:
            raise MeasureError(f"--study {args.study}: has no estimate of its own; give --pairs instead")
        return status
    if args.pairs is None:
        raise MeasureError("plan: give --pairs (the study's pair count) or --study (a study with its own estimate)")
    plan = make_plan(args.model, args.pairs, args.gpus, args.dtype, args.seq_len, args.shard_size,
                     args.max_rows, not args.no_head_patching, args.gpu_tflops, args.efficiency,
                     args.gpu_memory_gib, args.threads)
    print(format_plan(plan))
    if args.json:
        from safe_io import write_atomic

        from measure.runner.jsonio import json_text
        write_atomic(args.json, json_text(_rounded(plan)))
    return 0


def _rounded(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
