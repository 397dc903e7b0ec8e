"""The GPU smoke run behind `benchmarks/gpu_smoke.sh` (see there for usage).

Builds a random-weight LlamaForSequenceClassification from a config (default: the 8B shape in
benchmarks/configs/llama-3.1-8b.json) directly on the device, in the given dtype: nothing is
downloaded. Then, on a few random pairs:

1. check: the sweep against the naive loop (the Hugging Face forward pass with hooks, one per
   pair, component and mode) on a few components of a few layers, in modes mean, zero and swap;
   the largest disagreement must be within the dtype's tolerance, relative to the margins' scale;
2. throughput: the timed sweep of every attn/mlp block and head of the chosen layers, reported as
   layer evaluations per second, and as achieved FLOP/s and efficiency under the plan's FLOP
   model (measure/runner/plan.py), so the plan's assumed GPU efficiency can be replaced by this number;
   then the same for the opt-in ladder sweep (`patch_ladder`), checked against the sweep.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from measure.models.adapter import Adapter, check_device_dtype  # noqa: E402
from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_ladder, patch_sweep  # noqa: E402
from measure.runner.plan import GPU_PEAK_TFLOPS, Shape, shard_work  # noqa: E402

CONFIG_8B = REPO / "benchmarks" / "configs" / "llama-3.1-8b.json"
TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256,
        "max_position_embeddings": 256, "num_labels": 1, "pad_token_id": 0}
# largest |sweep - naive| allowed, relative to max(1, largest |naive margin|)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 1e-2}


def build(config: dict, device: torch.device, dtype: torch.dtype) -> Adapter:
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    keep = {k: v for k, v in config.items() if not k.startswith("_") and k not in ("architectures", "torch_dtype")}
    cfg = LlamaConfig(**keep)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForSequenceClassification.from_config(cfg, attn_implementation="eager", dtype=dtype)
    with torch.no_grad():  # random init gives near-zero scores; a larger score row makes margins visible
        model.score.weight.mul_(20)
    return Adapter(model, None, f"random-llama-{cfg.num_hidden_layers}L-{cfg.hidden_size}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 4-layer hidden-64 model on the CPU in float32")
    parser.add_argument("--config", type=Path, default=CONFIG_8B)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--layers", default="0,15,31", help="layers whose components are patched")
    parser.add_argument("--max-rows", type=int, default=512)
    parser.add_argument("--json", type=Path, default=None, help="write the measured numbers here")
    args = parser.parse_args()
    if args.tiny:
        args.device, args.dtype, args.seq_len, args.layers, args.pairs = "cpu", "float32", 16, "0,3", 3
        config = dict(TINY)
    else:
        config = json.loads(args.config.read_text(encoding="utf-8"))
    device, dtype = check_device_dtype(args.device, args.dtype)
    torch.set_num_threads(1)
    layers = [int(x) for x in args.layers.split(",")]
    shape = Shape.from_config(config, str(args.config))
    if max(layers) >= shape.layers:
        print(f"error: --layers {args.layers}: the model has {shape.layers} layers", file=sys.stderr)
        return 2
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"{dtype}, torch {torch.__version__}")
    t0 = time.perf_counter()
    adapter = build(config, device, dtype)
    print(f"built {adapter.model_id} ({shape.params() / 1e9:.2f} B params) in {time.perf_counter() - t0:.1f} s")

    gen = torch.Generator().manual_seed(1)
    seqs = []
    for _ in range(2 * args.pairs):  # lengths vary, so padding and scoring positions are exercised
        n = int(torch.randint(args.seq_len // 2, args.seq_len + 1, (1,), generator=gen))
        seqs.append(torch.randint(1, shape.vocab, (n,), generator=gen).tolist())
    batch = adapter.batch(seqs)
    with torch.no_grad():
        run = adapter.clean_run(batch)
        acc = StatsAccumulator()
        acc.add(adapter, batch, run)
        stats = acc.finish()

    # 1. the check, on a few components per layer
    few = [c for i in layers for c in (f"attn_L{i}", f"head_L{i}_H0", f"head_L{i}_H{shape.heads - 1}", f"mlp_L{i}")]
    fast = patch_sweep(adapter, batch, run, stats, few, MODES, args.max_rows)
    slow = naive_sweep(adapter, batch, stats, few, MODES)
    worst = max(float((fast[k][0].float() - v.float()).abs().max()) for k, v in slow.items())
    scale = max(1.0, max(float(v.abs().max()) for v in slow.values()))
    tol = TOLERANCE[dtype]
    agree = worst <= tol * scale
    print(f"check: sweep vs naive loop on {len(few)} components x {len(MODES)} modes x {args.pairs} pairs: "
          f"largest disagreement {worst:.3g} (margins up to {scale:.3g}; allowed {tol:g} x that): "
          f"{'agree' if agree else 'DISAGREE'}")

    # 2. throughput: every component of the chosen layers
    full = [c for c in adapter.components() if c != "embed" and int(c.split("_L")[1].split("_")[0]) in layers]
    def timed(sweep):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        counter = {}
        t0 = time.perf_counter()
        with torch.no_grad():
            result = sweep(adapter, batch, adapter.clean_run(batch), stats, full, MODES, args.max_rows, counter)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            counter["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / (1 << 30)
        return time.perf_counter() - t0, counter, result

    seconds, counter, swept = timed(patch_sweep)
    ladder_s, _c, laddered = timed(patch_ladder)  # the opt-in ladder sweep, same components
    ladder_worst = max(float((laddered[k][0].float() - v[0].float()).abs().max()) for k, v in swept.items())
    agree = agree and ladder_worst <= tol * scale
    T = batch.ids.shape[1]
    work = shard_work(shape, args.pairs, T, True, layers_patched=layers, clean_passes=1)
    evals = counter["layer_evals"] + 2 * args.pairs * shape.layers
    rate = work["flops"] / seconds
    out = {"device": str(device), "dtype": args.dtype, "shape": asdict(shape), "pairs": args.pairs,
           "width": T, "layers_patched": layers, "components": len(full), "seconds": seconds,
           "layer_evals": evals, "layer_evals_per_s": evals / seconds, "flops_model": work["flops"],
           "achieved_tflops": rate / 1e12, "efficiency_vs_stated_peak": rate / (GPU_PEAK_TFLOPS * 1e12),
           "largest_disagreement": worst, "ladder_seconds": ladder_s,
           "ladder_vs_sweep_disagreement": ladder_worst, "agree": agree}
    if device.type == "cuda":
        out["peak_memory_gib"] = counter["peak_memory_gib"]  # the sweep's
    print(f"throughput: {len(full)} components x {len(MODES)} modes x {args.pairs} pairs at width {T} in "
          f"{seconds:.2f} s: {evals / seconds:,.1f} layer evaluations/s, {rate / 1e12:.3f} TFLOP/s by the "
          f"plan's FLOP model" + (f" = {out['efficiency_vs_stated_peak']:.3f} of the stated "
                                  f"{GPU_PEAK_TFLOPS:g} TFLOP/s peak" if device.type == "cuda" else ""))
    print(f"ladder sweep (opt-in, patch_ladder): {ladder_s:.2f} s, {seconds / ladder_s:.2f}x the sweep; "
          f"largest disagreement with the sweep {ladder_worst:.3g}: {'agree' if ladder_worst <= tol * scale else 'DISAGREE'}")
    if "peak_memory_gib" in out:
        print(f"peak GPU memory {out['peak_memory_gib']:.2f} GiB")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
