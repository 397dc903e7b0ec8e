"""What a reviewer tries before believing the realprefs reward model learned anything (issue 30):
three baselines per objective, fitted on the training side of `data/realprefs/split.json` and
scored on its evaluation side, before any model is trained.

- `length`: the character-length difference of the two replies (chosen minus rejected), signed
  the way that scores better on the training pairs (positive on a tie); the rule is its sign.
- `bag_of_words`: a Bradley-Terry logistic regression, without intercept, on the difference of
  the two replies' binary word-presence vectors (lower-cased `\\w+` words), over the words that
  occur in at least `MIN_DF` training replies of the objective.
- `frozen_trunk`: the same fit on the difference of the two sequences' pooled features: the mean
  over real tokens of the frozen MiniLM-L6 trunk's last layer, each sequence cut to the token
  budget (`budget.py`: prompt tail and reply), divided by one overall scale (the root-mean-square
  norm of the training pairs' differences, so that the penalty grid means the same thing as for
  the bag of words). This is the untrained model: the trunk the realprefs model starts from,
  with a linear head.

The L2 penalty of both fits (`mean(softplus(-X w)) + l2 |w|^2`) is chosen from the fixed grid
`L2_GRID` by five-fold cross-validation over groups on the training side only (highest mean
fold accuracy; ties to the larger penalty), then the fit is redone on the whole training side: a
reviewer would tune the penalty, so the baseline gets the tuning, on training pairs alone.

A pair scores 1 when its margin is positive, 0.5 when it is zero, 0 when negative; accuracy is the
mean score, with a 95 % percentile interval from `RESAMPLES` bootstrap resamples of the
evaluation side's groups (a post compared ten times is one draw, not ten).

`python -m measure.studies.realprefs.baselines` computes the trunk's features (cached under
`.cache/realprefs/`, keyed by the texts and the trunk), fits everything and writes
`data/realprefs/baselines.json` (accuracies, intervals, penalties, agreement between baselines)
and `data/realprefs/baselines_eval.jsonl` (each held-out pair's margin and score per baseline:
the rows the preregistered paired test sets the trained model against).
"""
from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

import numpy as np

from measure.errors import MeasureError
from measure.studies.realprefs import budget
from measure.studies.realprefs.data import DATA, OBJECTIVES, REPO, load_pairs
from measure.studies.realprefs.split import load_split

NAMES = ("length", "bag_of_words", "frozen_trunk")
L2_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
CV_FOLDS = 5
MIN_DF = 2
RESAMPLES = 2000
SEED = 30
BATCH = 32
OUT_JSON = DATA / "realprefs" / "baselines.json"
OUT_ROWS = DATA / "realprefs" / "baselines_eval.jsonl"
CACHE = REPO / ".cache" / "realprefs"
WORD = re.compile(r"\w+")


# ----- scoring ---------------------------------------------------------------------------------------
def scores(margins: np.ndarray) -> np.ndarray:
    """Per-pair scores: 1 for a positive margin, 0.5 for zero, 0 for negative."""
    return np.where(margins > 0, 1.0, np.where(margins == 0, 0.5, 0.0))


def group_bootstrap(values: np.ndarray, groups: list[str], resamples: int = RESAMPLES,
                    seed: int = SEED) -> tuple[float, float]:
    """95 % percentile interval of the mean of `values`, resampling whole groups with replacement."""
    keys = sorted(set(groups))
    index = {g: i for i, g in enumerate(keys)}
    gid = np.array([index[g] for g in groups])
    sums = np.bincount(gid, weights=values, minlength=len(keys))
    counts = np.bincount(gid, minlength=len(keys)).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(keys), size=(resamples, len(keys)))
    means = sums[draws].sum(1) / counts[draws].sum(1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


# ----- the Bradley-Terry fit ---------------------------------------------------------------------------
def bt_fit(x, l2: float) -> np.ndarray:
    """w minimising mean(softplus(-x w)) + l2 |w|^2 (x dense or scipy.sparse, float64), by
    Newton's method with a trust region and exact Hessian-vector products (scipy's trust-ncg), to
    a gradient of at most 1e-10 in every coordinate (1e-8 where rounding stops it first). The
    problem is strictly convex, so the minimiser is unique."""
    from scipy.optimize import minimize
    from scipy.special import expit

    n = x.shape[0]
    xt = x.T.tocsr() if hasattr(x, "tocsr") else np.ascontiguousarray(x.T)

    def loss(w):
        m = x @ w
        return np.logaddexp(0.0, -m).mean() + l2 * w @ w, -(xt @ expit(-m)) / n + 2 * l2 * w

    def hessp(w, v):
        s = expit(x @ w)
        return xt @ (s * (1 - s) * (x @ v)) / n + 2 * l2 * v
    result = minimize(loss, np.zeros(x.shape[1]), jac=True, hessp=hessp, method="trust-ncg",
                      options={"gtol": 1e-10, "maxiter": 1000})
    # near 1e-10 the trust region may stop on rounding ("bad approximation"): accept a gradient
    # that small, which leaves every margin's sign settled
    if not result.success and np.abs(result.jac).max() > 1e-8:
        raise ArithmeticError(f"bt_fit did not converge (l2 {l2}, {n} rows): {result.message}")
    return result.x


def cv_folds(groups: list[str], folds: int = CV_FOLDS, seed: int = SEED) -> np.ndarray:
    """The cross-validation fold of each training pair, by a seeded hash of its group."""
    def fold(g):
        return int.from_bytes(hashlib.sha256(f"realprefs-cv:{seed}:{g}".encode()).digest()[:8], "big") % folds
    return np.array([fold(g) for g in groups])


def fit_with_cv(x_train, groups: list[str]) -> tuple[np.ndarray, float, dict]:
    """(w, chosen l2, {l2: mean fold accuracy}) for training rows `x_train`."""
    fold = cv_folds(groups)
    table = {}
    for l2 in L2_GRID:
        accs = []
        for k in range(CV_FOLDS):
            tr, te = fold != k, fold == k
            w = bt_fit(x_train[tr], l2)
            accs.append(scores(x_train[te] @ w).mean())
        table[l2] = float(np.mean(accs))
    best = max(L2_GRID, key=lambda l2: (round(table[l2], 12), l2))
    return bt_fit(x_train, best), best, table


# ----- the three baselines --------------------------------------------------------------------------
def length_rule(train, test) -> tuple[np.ndarray, dict]:
    """Held-out margins of the length rule, and its fitted sign and training accuracy."""
    def diff(ps):
        return np.array([len(p.chosen) - len(p.rejected) for p in ps], dtype=float)
    d = diff(train)
    plus = scores(d).mean()
    sign = 1.0 if plus >= 0.5 else -1.0
    return sign * diff(test), {"sign": sign, "train_accuracy": float(scores(sign * d).mean())}


def words(text: str) -> set[str]:
    """The distinct lower-cased words of a text."""
    return set(WORD.findall(text.lower()))


def bag_of_words(train, test) -> tuple[np.ndarray, dict]:
    """Held-out margins of the bag-of-words fit, and its vocabulary size, penalty and CV table."""
    from scipy import sparse

    df: dict[str, int] = {}
    for p in train:
        for side in (p.chosen, p.rejected):
            for w in words(side):
                df[w] = df.get(w, 0) + 1
    vocab = sorted(w for w, c in df.items() if c >= MIN_DF)
    index = {w: i for i, w in enumerate(vocab)}

    def matrix(ps):
        rows, cols, vals = [], [], []
        for r, p in enumerate(ps):
            a = {index[w] for w in words(p.chosen) if w in index}
            b = {index[w] for w in words(p.rejected) if w in index}
            for c in sorted(a - b):
                rows.append(r), cols.append(c), vals.append(1.0)
            for c in sorted(b - a):
                rows.append(r), cols.append(c), vals.append(-1.0)
        return sparse.csr_matrix((vals, (rows, cols)), shape=(len(ps), len(vocab)), dtype=np.float64)
    x_train = matrix(train)
    w, l2, table = fit_with_cv(x_train, [p.group for p in train])
    return matrix(test) @ w, {"vocabulary": len(vocab), "l2": l2, "cv_accuracy": table,
                              "train_accuracy": float(scores(x_train @ w).mean())}


def frozen_trunk(train, test, features: dict) -> tuple[np.ndarray, dict]:
    """Held-out margins of the linear head on the frozen trunk's pooled features."""
    def diff(ps):
        return np.stack([features[p.pair_id][0] - features[p.pair_id][1] for p in ps]).astype(np.float64)
    raw = diff(train)
    scale = float(np.sqrt((raw ** 2).sum(1).mean()))  # rows of unit root-mean-square norm
    x_train = raw / scale
    w, l2, table = fit_with_cv(x_train, [p.group for p in train])
    return (diff(test) / scale) @ w, {"l2": l2, "cv_accuracy": table, "feature_scale": scale,
                                      "train_accuracy": float(scores(x_train @ w).mean())}


# ----- the trunk's features ---------------------------------------------------------------------------
def trunk_features(pairs, progress: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{pair_id: (chosen features, rejected features)}, float32 (384,): the mean over real tokens
    of the frozen trunk's last layer, each sequence under the token budget. Cached under
    `.cache/realprefs/` by a hash of the sequences and the trunk; batches of `BATCH` sequences
    sorted by length, so a rerun computes the same shapes in the same order."""
    import torch
    from tqdm import tqdm

    from measure.models.pooled_heads import mean_pool
    from measure.studies.minilm.model import TRUNK_SHA256, load_trunk

    bert, tokenizer = load_trunk()
    seqs = []
    for p in pairs:
        seqs.append(budget.encode(tokenizer, p.prompt, p.chosen))
        seqs.append(budget.encode(tokenizer, p.prompt, p.rejected))
    key = hashlib.sha256((TRUNK_SHA256 + repr(seqs)).encode()).hexdigest()[:16]
    cache = CACHE / f"features-{key}.npy"
    if cache.exists():
        feats = np.load(cache)
    else:
        order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
        feats = np.zeros((len(seqs), bert.config.hidden_size), dtype=np.float32)
        with torch.no_grad():
            for start in tqdm(range(0, len(order), BATCH), desc="trunk features", disable=not progress):
                chunk = order[start:start + BATCH]
                width = max(len(seqs[i]) for i in chunk)
                ids = torch.zeros((len(chunk), width), dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for r, i in enumerate(chunk):
                    ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
                    mask[r, :len(seqs[i])] = 1
                hidden = bert(input_ids=ids, attention_mask=mask,
                              token_type_ids=torch.zeros_like(ids)).last_hidden_state
                feats[chunk] = mean_pool(hidden, mask).numpy()
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.tmp.npy")
        np.save(tmp, feats)
        tmp.replace(cache)
    return {p.pair_id: (feats[2 * k], feats[2 * k + 1]) for k, p in enumerate(pairs)}


# ----- the whole computation ------------------------------------------------------------------------
def run(progress: bool = True) -> tuple[dict, list[dict]]:
    """(baselines.json document, held-out rows) from the verified pairs and the committed split."""
    pairs = load_pairs()
    side = load_split(pairs)
    features = trunk_features(pairs, progress)
    doc = {"study": "realprefs", "baselines": list(NAMES), "settings": {
        "l2_grid": list(L2_GRID), "cv_folds": CV_FOLDS, "min_df": MIN_DF, "resamples": RESAMPLES,
        "seed": SEED, "interval": "95 % percentile, bootstrap over evaluation groups",
        "score": "1 if margin > 0, 0.5 if 0, else 0", "token_budget": budget.RULE}, "objectives": {}}
    rows = []
    for objective in OBJECTIVES:
        train = [p for p in pairs if p.objective == objective and side[p.pair_id] == "train"]
        test = [p for p in pairs if p.objective == objective and side[p.pair_id] == "eval"]
        groups = [p.group for p in test]
        margins, fits = {}, {}
        margins["length"], fits["length"] = length_rule(train, test)
        margins["bag_of_words"], fits["bag_of_words"] = bag_of_words(train, test)
        margins["frozen_trunk"], fits["frozen_trunk"] = frozen_trunk(train, test, features)
        sc = {name: scores(m) for name, m in margins.items()}
        block = {"n_train": len(train), "n_eval": len(test), "eval_groups": len(set(groups))}
        for name in NAMES:
            lo, hi = group_bootstrap(sc[name], groups)
            block[name] = {"accuracy": float(sc[name].mean()), "ci95": [lo, hi],
                           "ties": int((margins[name] == 0).sum()), **fits[name]}
        best = max(NAMES, key=lambda name: (round(block[name]["accuracy"], 12), -NAMES.index(name)))
        block["best"] = best
        block["discordance"] = {f"{a}|{b}": float((sc[a] != sc[b]).mean())
                                for i, a in enumerate(NAMES) for b in NAMES[i + 1:]}
        doc["objectives"][objective] = block
        for k, p in enumerate(test):
            rows.append({"pair_id": p.pair_id, "objective": objective, "group": p.group,
                         **{f"margin_{n}": float(margins[n][k]) for n in NAMES},
                         **{f"score_{n}": float(sc[n][k]) for n in NAMES}})
    return doc, rows


def main(argv: list[str] | None = None) -> int:
    """Compute and write the baselines; exit 2 with one line on any problem."""
    from measure import numerics
    from measure.runner.jsonio import json_text, jsonl_text

    if argv:
        print("usage: python -m measure.studies.realprefs.baselines (no arguments)", file=sys.stderr)
        return 2
    try:
        import torch
        torch.set_num_threads(1)  # native kernels: the portable mode would take hours here (docstring)
        started = time.time()
        doc, rows = run()
        doc["numerics"] = numerics.in_effect()
        for path, text in ((OUT_JSON, json_text(doc)), (OUT_ROWS, jsonl_text(rows))):
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        for objective, block in doc["objectives"].items():
            print(f"{objective} (n_eval {block['n_eval']}): " + ", ".join(
                f"{n} {block[n]['accuracy']:.3f} [{block[n]['ci95'][0]:.3f}, {block[n]['ci95'][1]:.3f}]"
                for n in NAMES) + f"; best {block['best']}")
        print(f"wall {time.time() - started:.0f} s")
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
