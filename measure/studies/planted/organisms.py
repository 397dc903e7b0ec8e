"""Planted organisms: Llama reward models whose mechanism is set by hand, weight by weight.

Every organism is a `LlamaForSequenceClassification` (8 layers, 8 heads of width 16, hidden 128,
MLP 128) with a word-level `tokenizer.json` that `AutoTokenizer` loads, so the adapter and the
instruments run on it exactly as on any Hugging Face reward model. Nothing is trained and
nothing is measured to make the key: the code below sets the weights, and the same code writes
each component's role into `key.json` as it sets it.

The residual stream is a set of named channels (one basis direction each; which of the 128
directions is which is drawn per organism) plus a scratch subspace:

- `one`: a constant 100 in every token's embedding. It dominates the RMS of the stream, so every
  norm divides by nearly the same number and acts almost linearly (real models carry similar
  massive activations); designated components read their biases and thresholds from it.
- `bos`: marks `<bos>`, the attention sink of the designated heads.
- `lex:*`: word classes, written by the embedding (`lex:poison`, `lex:fire` and `lex:knife` are
  three separate channels, so no single embedding direction means "hazard").
- computed channels, written by designated components only: `hazard`, `hedge_count`,
  `decoy_mark`, `detail_moved`, `detail_track`, and `reward`, the only channel the score head
  reads.
- scratch: every other direction. Every non-designated head and MLP unit reads the stream
  (scratch and word classes alike, so its output does change with the words) and writes into
  scratch only; designated components never read scratch. Scratch reaches the reward only
  through the RMS of the final norm, which `one` makes a small effect.

A designated head queries from `one` at every position and keys on one channel, so from the
scoring token it attends to the marked word when the response has one and to `<bos>` otherwise;
its value reads the same channel. Queries and keys sit in the slowest rotary pair of the head
(rope theta 1e6), so position barely changes the pattern.

Rules and their mechanisms (`ROLES` lists the role names):

- politeness: two carrier heads write the reward additively, with shares drawn per organism.
- hazard: an MLP at the hazard word's position (layer 0 or 1) computes `hazard` from the three
  word channels; a late head (layer 5 to 7) moves it to the scoring token and writes the reward.
  At the scoring token the MLP writes nothing: attribution should credit only the mover.
- hedging: two backup heads each write the full penalty and a count; a self-repair MLP reads the
  count and removes everything beyond one penalty, so the rule pays once whether one or both
  heads fire. Removing one backup leaves the margin as it was.
- certainty: two carrier heads as for politeness, plus a decoy head that writes three times the
  rule's reward along the reward direction and a mark, and a canceller MLP that reads the mark
  and writes the opposite. Decoy and canceller are not in the key: together they are inert.
- detail: a mover head brings the word's mark to the scoring token, where a scorer MLP turns it
  into reward; a tracker head copies the same mark into `detail_track`, which nothing reads.

Role strength (`strength` in key.json) is the component's Shapley value in its rule's key
circuit, computed from the designed circuit function (`_circuit`: which reward the rule pays
when a subset of its key components is present, absent ones contributing zero), as a fraction
of the rule's weight. It is zero for every component outside the key, distractors included.

Usage:
    python -m measure.studies.planted.organisms build     # (re)build the organisms into models/planted/, check sha256
    python -m measure.studies.planted.organisms verify    # resample-ablation check of every key, printed
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import random
import sys
from pathlib import Path

from measure.studies.planted import data as pd
from measure.errors import MeasureError

REPO = Path(__file__).resolve().parents[3]
PLANTED_DIR = REPO / "models" / "planted"
SEEDS = (0, 1, 2, 3, 4)
LAYERS, HEADS, HEAD_DIM, HIDDEN, MLP = 8, 8, 16, 128, 128
ONE = 100.0                      # the constant channel's value
QK_DIM = 7                       # the slowest rotary pair of a head (pairs with QK_DIM + 8)
Q_GAIN, K_WORD, K_SINK = 8.0, 12.0, 6.0   # attention logits: 24 on a marked word, 12 on <bos>
DECOY_GAIN = 3.0
STUDY_PER_RULE = 5               # study twins per rule and organism (each its own seed)
VERIFY_PER_RULE = 24             # held-out twins per rule for the key verification
VERIFY_TOLERANCE = 0.1           # fixed before any check ran: see docs/measure.md
SCRATCH_EMBED, SCRATCH_READ, SCRATCH_WRITE = 0.15, 0.25, 0.005
UNIVERSE = "head and mlp components (64 heads and 8 MLPs: a partition of every write but the embedding's)"
CHANNELS = ("one", "bos", "lex:polite", "lex:poison", "lex:fire", "lex:knife", "lex:hedge",
            "lex:certain", "lex:detail", "hazard", "hedge_count", "decoy_mark", "detail_moved",
            "detail_track", "reward")
LEX = {"politeness": ("lex:polite",), "hazard": ("lex:poison", "lex:fire", "lex:knife"),
       "hedging": ("lex:hedge",), "certainty": ("lex:certain",), "detail": ("lex:detail",)}
ROLES = {"carrier": "writes a share of the rule's reward at the scoring token",
         "early_compute": "computes the rule's feature at the word's position, upstream",
         "late_mover": "moves the computed feature to the scoring token and writes the reward",
         "backup": "one of two redundant heads; either alone carries the rule",
         "self_repair": "removes the second penalty when both backups fire",
         "mover": "moves the word's mark to the scoring token (writes no reward)",
         "scorer": "turns the moved mark into reward at the scoring token",
         "decoy": "writes strongly along the reward direction; cancelled downstream (not in the key)",
         "canceller": "cancels the decoy exactly (not in the key)",
         "tracker": "its output tracks the feature; nothing reads it (not in the key)"}


def silu(x: float) -> float:
    return x / (1.0 + math.exp(-x))


# ---------------------------------------------------------------- the design of one organism
def design(seed: int) -> dict:
    """Which layers, heads and residual directions do what, drawn from `seed` under the
    constraints each mechanism needs (compute before move, backups before their repair...)."""
    rng = random.Random(f"planted/design/{seed}")
    for _attempt in range(1000):
        taken: set[tuple[int, int]] = set()

        def head(layers):
            options = [(i, h) for i in layers for h in range(HEADS) if (i, h) not in taken]
            slot = rng.choice(options)
            taken.add(slot)
            return slot

        d = {"hazard_mlp": rng.choice([0, 1])}
        d["hazard_mover"] = head([5, 6, 7])
        d["backup_a"] = head([1, 2, 3])
        d["backup_b"] = head([d["backup_a"][0], 2, 3, 4])
        d["repair_mlp"] = rng.choice(range(max(d["backup_a"][0], d["backup_b"][0]), 7))
        d["carrier_c1"], d["carrier_c2"] = head(range(1, 7)), head(range(1, 7))
        d["decoy"] = head(range(1, 6))
        d["canceller_mlp"] = rng.choice(range(d["decoy"][0], 8))
        d["detail_mover"] = head(range(1, 5))
        d["scorer_mlp"] = rng.choice(range(d["detail_mover"][0], 8))
        d["tracker"] = head(range(1, 8))
        d["carrier_p1"], d["carrier_p2"] = head(range(1, 8)), head(range(1, 8))
        mlps = [d["hazard_mlp"], d["repair_mlp"], d["canceller_mlp"], d["scorer_mlp"]]
        if len(set(mlps)) == len(mlps):
            break
    else:  # pragma: no cover - the constraints leave many solutions
        raise MeasureError(f"planted seed {seed}: no design satisfies the constraints")
    d["share_politeness"] = round(rng.uniform(0.55, 0.8), 2)
    d["share_certainty"] = round(rng.uniform(0.55, 0.8), 2)
    dims = list(range(HIDDEN))
    rng.shuffle(dims)
    d["channels"] = {name: dims[k] for k, name in enumerate(CHANNELS)}
    d["scratch"] = sorted(dims[len(CHANNELS):])
    return d


def _head_name(slot) -> str:
    return f"head_L{slot[0]}_H{slot[1]}"


def _circuit(rule: str, d: dict):
    """(key components, designed value function over subsets, normalised to the rule's weight)."""
    if rule == "politeness":
        p1, p2, s = _head_name(d["carrier_p1"]), _head_name(d["carrier_p2"]), d["share_politeness"]
        return [p1, p2], lambda S: s * (p1 in S) + (1 - s) * (p2 in S)
    if rule == "certainty":
        c1, c2, s = _head_name(d["carrier_c1"]), _head_name(d["carrier_c2"]), d["share_certainty"]
        return [c1, c2], lambda S: s * (c1 in S) + (1 - s) * (c2 in S)
    if rule == "hazard":
        m, h = f"mlp_L{d['hazard_mlp']}", _head_name(d["hazard_mover"])
        return [m, h], lambda S: float(m in S and h in S)
    if rule == "detail":
        h, m = _head_name(d["detail_mover"]), f"mlp_L{d['scorer_mlp']}"
        return [h, m], lambda S: float(h in S and m in S)
    if rule == "hedging":
        a, b, m = _head_name(d["backup_a"]), _head_name(d["backup_b"]), f"mlp_L{d['repair_mlp']}"

        def value(S):
            count = (a in S) + (b in S)
            return count - (m in S) * (count - min(count, 1))
        return [a, b, m], value
    raise MeasureError(f"unknown rule {rule!r}")


def shapley(players: list[str], value) -> dict[str, float]:
    """Exact Shapley values of a small game (every ordering enumerated)."""
    totals = dict.fromkeys(players, 0.0)
    orders = list(itertools.permutations(players))
    for order in orders:
        present: set[str] = set()
        for p in order:
            before = value(present)
            present.add(p)
            totals[p] += value(present) - before
    return {p: totals[p] / len(orders) for p in players}


def key_of(seed: int, d: dict | None = None) -> dict:
    """The organism's answer key, from its design alone."""
    d = d or design(seed)
    roles = {"politeness": ["carrier", "carrier"], "certainty": ["carrier", "carrier"],
             "hazard": ["early_compute", "late_mover"], "detail": ["mover", "scorer"],
             "hedging": ["backup", "backup", "self_repair"]}
    distractors = {"certainty": {_head_name(d["decoy"]): "decoy",
                                 f"mlp_L{d['canceller_mlp']}": "canceller"},
                   "detail": {_head_name(d["tracker"]): "tracker"}}
    dims = {}
    for rule in pd.RULES:
        members, value = _circuit(rule, d)
        values = shapley(members, value)
        dims[dimension_name(seed, rule)] = {
            "organism": f"planted-s{seed}", "rule": rule,
            "weight": pd.WEIGHTS[rule], "words": list(pd.WORDS[rule]), "components": members,
            "roles": {c: {"role": r, "strength": round(abs(values[c]), 6)}
                      for c, r in zip(members, roles[rule])},
            "distractors": {c: {"role": r, "strength": 0.0}
                            for c, r in distractors.get(rule, {}).items()}}
    return {"organism": f"planted-s{seed}", "seed": seed, "universe": UNIVERSE, "dimensions": dims,
            "shares": {"politeness": d["share_politeness"], "certainty": d["share_certainty"]},
            "channels": d["channels"]}


def dimension_name(seed: int, rule: str) -> str:
    """One rule of one organism is one dimension of the study: `s0-hazard`."""
    return f"s{seed}-{rule}"


# ---------------------------------------------------------------- the weights
def _gauss_rows(rng: random.Random, n_rows: int, n_cols: int, cols: list[int], sigma: float):
    out = [[0.0] * n_cols for _ in range(n_rows)]
    for row in out:
        for c in cols:
            row[c] = rng.gauss(0.0, sigma)
    return out


def weights(seed: int, d: dict | None = None) -> dict:
    """{parameter name: nested lists} of the organism; plain Python floats, drawn with
    `random.Random`, so the same seed gives the same numbers on any platform."""
    d = d or design(seed)
    ch = d["channels"]
    scratch = d["scratch"]
    read = [k for k in range(HIDDEN) if k not in (ch["one"], ch["bos"])]
    rng = random.Random(f"planted/weights/{seed}")
    vocab = pd.vocabulary()
    classes = {w: LEX[r] for r in pd.RULES for w in pd.WORDS[r]}
    embed = []
    for word in vocab:
        row = [0.0] * HIDDEN
        for c in scratch:
            row[c] = rng.gauss(0.0, SCRATCH_EMBED)
        row[ch["one"]] = ONE
        if word == "<bos>":
            row[ch["bos"]] = 1.0
        if word in classes:
            lex = classes[word]
            row[ch[lex[0] if len(lex) == 1 else f"lex:{word}"]] = 1.0
        embed.append(row)
    p = {"model.embed_tokens.weight": embed}
    heads = {}  # (layer, head) -> (source channel, {channel: amount written})
    s_p, s_c = d["share_politeness"], d["share_certainty"]
    heads[d["carrier_p1"]] = ("lex:polite", {"reward": s_p})
    heads[d["carrier_p2"]] = ("lex:polite", {"reward": 1 - s_p})
    heads[d["hazard_mover"]] = ("hazard", {"reward": pd.WEIGHTS["hazard"]})
    for b in ("backup_a", "backup_b"):
        heads[d[b]] = ("lex:hedge", {"reward": pd.WEIGHTS["hedging"], "hedge_count": 1.0})
    heads[d["carrier_c1"]] = ("lex:certain", {"reward": s_c})
    heads[d["carrier_c2"]] = ("lex:certain", {"reward": 1 - s_c})
    heads[d["decoy"]] = ("lex:certain", {"reward": DECOY_GAIN * pd.WEIGHTS["certainty"], "decoy_mark": 1.0})
    heads[d["detail_mover"]] = ("lex:detail", {"detail_moved": 1.0})
    heads[d["tracker"]] = ("lex:detail", {"detail_track": 1.0})
    mlp_units = {  # layer -> [(gate {channel: w}, up {channel: w}, down {channel: w})]
        d["hazard_mlp"]: [({"lex:poison": 20.0, "lex:fire": 20.0, "lex:knife": 20.0, "one": -10.0 / ONE},
                           {"one": 1.0 / ONE}, {"hazard": 1.0 / silu(10.0)})],
        d["repair_mlp"]: [  # 0.8 * count - 0.8 * step(count), step = [count >= 1] as two ramps
            ({"one": 20.0 / ONE}, {"hedge_count": 1.0 / 20.0}, {"reward": -pd.WEIGHTS["hedging"]}),
            ({"hedge_count": 50.0, "one": -20.0 / ONE}, {"one": 1.0 / ONE}, {"reward": pd.WEIGHTS["hedging"] / 10.0}),
            ({"hedge_count": 50.0, "one": -30.0 / ONE}, {"one": 1.0 / ONE}, {"reward": -pd.WEIGHTS["hedging"] / 10.0})],
        d["canceller_mlp"]: [({"one": 20.0 / ONE}, {"decoy_mark": 1.0 / 20.0},
                              {"reward": -DECOY_GAIN * pd.WEIGHTS["certainty"]})],
        d["scorer_mlp"]: [({"detail_moved": 20.0, "one": -10.0 / ONE}, {"one": 1.0 / ONE},
                           {"reward": pd.WEIGHTS["detail"] / silu(10.0)})],
    }
    width = HEADS * HEAD_DIM
    for i in range(LAYERS):
        pre = f"model.layers.{i}."
        q = [[0.0] * HIDDEN for _ in range(width)]
        k = [[0.0] * HIDDEN for _ in range(width)]
        v = [[0.0] * HIDDEN for _ in range(width)]
        o = [[0.0] * width for _ in range(HIDDEN)]
        for h in range(HEADS):
            base = h * HEAD_DIM
            if (i, h) in heads:
                source, writes = heads[(i, h)]
                q[base + QK_DIM][ch["one"]] = Q_GAIN / ONE
                k[base + QK_DIM][ch[source]] = K_WORD
                k[base + QK_DIM][ch["bos"]] = K_SINK
                v[base][ch[source]] = 1.0
                for channel, amount in writes.items():
                    o[ch[channel]][base] = amount
                continue
            for rows in (q, k, v):
                block = _gauss_rows(rng, HEAD_DIM, HIDDEN, read, SCRATCH_READ)
                rows[base:base + HEAD_DIM] = block
            for r in range(HEAD_DIM):
                for c in scratch:
                    o[c][base + r] = rng.gauss(0.0, SCRATCH_WRITE)
        p[pre + "self_attn.q_proj.weight"] = q
        p[pre + "self_attn.k_proj.weight"] = k
        p[pre + "self_attn.v_proj.weight"] = v
        p[pre + "self_attn.o_proj.weight"] = o
        gate = _gauss_rows(rng, MLP, HIDDEN, read, SCRATCH_READ)
        up = _gauss_rows(rng, MLP, HIDDEN, read, SCRATCH_READ)
        down = [[0.0] * MLP for _ in range(HIDDEN)]
        for u in range(MLP):
            for c in scratch:
                down[c][u] = rng.gauss(0.0, SCRATCH_WRITE)
        for u, (g, up_w, dn) in enumerate(mlp_units.get(i, [])):
            gate[u] = [0.0] * HIDDEN
            up[u] = [0.0] * HIDDEN
            for c in range(HIDDEN):
                down[c][u] = 0.0
            for name, w in g.items():
                gate[u][ch[name]] = w
            for name, w in up_w.items():
                up[u][ch[name]] = w
            for name, w in dn.items():
                down[ch[name]][u] = w
        p[pre + "mlp.gate_proj.weight"] = gate
        p[pre + "mlp.up_proj.weight"] = up
        p[pre + "mlp.down_proj.weight"] = down
        gain = [ONE / math.sqrt(HIDDEN)] * HIDDEN
        p[pre + "input_layernorm.weight"] = gain
        p[pre + "post_attention_layernorm.weight"] = gain
    p["model.norm.weight"] = [ONE / math.sqrt(HIDDEN)] * HIDDEN
    score = [0.0] * HIDDEN
    score[ch["reward"]] = 1.0
    p["score.weight"] = [score]
    return p


def config_dict(vocab_size: int, pad: int, bos: int, eos: int) -> dict:
    return {"vocab_size": vocab_size, "hidden_size": HIDDEN, "intermediate_size": MLP,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "num_key_value_heads": HEADS, "head_dim": HEAD_DIM, "max_position_embeddings": 64,
            "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
            "num_labels": 1, "pad_token_id": pad, "bos_token_id": bos, "eos_token_id": eos,
            "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "hidden_act": "silu"}


def tensor_sha256(state: dict) -> str:
    """sha256 over every tensor's name, shape and float32 bytes, in name order."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to(torch.float32).contiguous().cpu()
        digest.update(f"{name}\0{list(t.shape)}\0".encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()


CHAT_TEMPLATE = "<bos> {{ messages[0]['content'] }} <sep> {{ messages[1]['content'] }} <eos>"


def tokenizer():
    """The word-level tokenizer every organism shares (a standard tokenizers WordLevel model)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(pd.vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>", sep_token="<sep>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(seed: int):
    """(model, design): the organism in memory, float32."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    d = design(seed)
    vocab = pd.vocabulary()
    cfg = LlamaConfig(**config_dict(len(vocab), vocab.index("<pad>"), vocab.index("<bos>"),
                                    vocab.index("<eos>")))
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(cfg)
    values = weights(seed, d)
    state = model.state_dict()
    missing = sorted(set(state) - set(values))
    if missing:
        raise MeasureError(f"planted seed {seed}: no weights set for {', '.join(missing)}")
    with torch.no_grad():
        for name, tensor in state.items():
            tensor.copy_(torch.tensor(values[name], dtype=torch.float32).reshape(tensor.shape))
    return model.eval(), d


def build(seed: int, folder: Path) -> dict:
    """Write organism `seed` to `folder`; returns its construction record."""
    from transformers.utils import logging as hf_logging

    from safe_io import write_atomic

    from measure.runner.jsonio import json_text, jsonl_text

    hf_logging.disable_progress_bar()
    model, d = build_model(seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    record = {"organism": f"planted-s{seed}", "seed": seed,
              "weights_sha256": tensor_sha256(model.state_dict()),
              "weights_hash": "sha256 over each tensor's name, shape and float32 bytes, in name order "
                              "(measure.studies.planted.organisms.tensor_sha256)",
              "design": {k: v for k, v in d.items() if k not in ("channels", "scratch")}}
    key = key_of(seed, d)
    key["weights_sha256"] = record["weights_sha256"]
    write_atomic(folder / "key.json", json_text(key))
    write_atomic(folder / "construction.json", json_text(record))
    prefix = f"s{seed}"
    study = pd.twins("study", seed, STUDY_PER_RULE, prefix)
    for row in study:  # one organism's rule is its own dimension: s0-hazard, s1-hazard, ...
        row["dimension"] = dimension_name(seed, row["dimension"])
    write_atomic(folder / "pairs.jsonl", jsonl_text(study))
    write_atomic(folder / "verify_twins.jsonl",
                 jsonl_text(pd.twins("verify", seed, VERIFY_PER_RULE, f"{prefix}-verify")))
    return record


def organism_dir(seed: int, root: Path = PLANTED_DIR) -> Path:
    return root / f"s{seed}"


def ensure_built(seed: int, root: Path = PLANTED_DIR) -> Path:
    """Rebuild the organism if its weights are missing, and check them against the committed
    construction record's sha256 (the weights are not committed; the record is)."""
    import torch
    from safetensors.torch import load_file

    folder = organism_dir(seed, root)
    record_path = folder / "construction.json"
    expected = json.loads(record_path.read_text(encoding="utf-8"))["weights_sha256"] if record_path.exists() else None
    if not (folder / "model.safetensors").exists():
        got = build(seed, folder)["weights_sha256"]
    else:
        got = tensor_sha256({k: v.to(torch.float32) for k, v in load_file(folder / "model.safetensors").items()})
    if expected is not None and got != expected:
        raise MeasureError(f"{record_path}: weights_sha256 {expected[:12]}..., but the built weights "
                           f"hash to {got[:12]}...; rebuild with `python -m measure.studies.planted.organisms build`")
    return folder


# ---------------------------------------------------------------- the key verification
def _forward(adapter, batch, source, patched: set[str]):
    """Rewards (B,) with the `patched` components' outputs taken from `source` (a clean run on
    inputs of the same shape), at every position; every other component computed live."""
    import torch

    family = adapter.family
    ctx = family.context(batch.ids.shape[1], batch.lengths)
    with torch.no_grad():
        resid = family.embed(batch.ids)
        for i in range(adapter.n_layers):
            attn, heads = family.attn(i, resid, ctx)
            swap = [h for h in range(adapter.n_heads) if f"head_L{i}_H{h}" in patched]
            if swap:
                heads = heads.clone()
                for h in swap:
                    sl = slice(h * adapter.head_dim, (h + 1) * adapter.head_dim)
                    heads[..., sl] = source.heads[i][..., sl]
                attn = family.attn_from_heads(i, heads)
            resid = family.join(i, "attn", resid, attn)
            mlp = source.mlp[i] if f"mlp_L{i}" in patched else family.mlp(i, resid)
            resid = family.join(i, "mlp", resid, mlp)
        return adapter.reward_at(resid, batch.score_idx)


def verify(adapter, twins: list[dict], key: dict, seed: int) -> dict:
    """Resample ablation from held-out twins, per rule.

    For each twin, a source response of the same token length is drawn from another held-out
    twin. Necessity: the key components take their outputs from the source on both sides; the
    margin should vanish (`necessity_residual` = mean |patched margin| / |clean margin|).
    Sufficiency: every other head and MLP takes its output from the source on both sides and the
    key runs live; the margin should survive (`sufficiency_retained` = mean patched / clean)."""
    universe = [c for c in adapter.components() if c.startswith(("head_", "mlp_"))]
    seqs = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"]))
            for t in twins]
    by_length: dict[int, list[tuple[int, int]]] = {}
    for p, (c, r) in enumerate(seqs):
        by_length.setdefault(len(c), []).extend([(p, 0), (p, 1)])
    rng = random.Random(f"planted/verify/{seed}")
    out = {}
    for rule in pd.RULES:
        members = set(key["dimensions"][dimension_name(seed, rule)]["components"])
        rows = [p for p, t in enumerate(twins) if t["dimension"] == rule]
        main, source = [], []
        for p in rows:
            options = [(q, side) for q, side in by_length[len(seqs[p][0])] if q != p]
            if not options:
                raise MeasureError(f"verify twins: no other twin of length {len(seqs[p][0])} for {twins[p]['pair_id']}")
            q, side = rng.choice(options)
            main += [seqs[p][0], seqs[p][1]]
            source += [seqs[q][side], seqs[q][side]]
        batch, src_batch = adapter.batch(main), adapter.batch(source)
        clean = adapter.clean_run(batch)
        src = adapter.clean_run(src_batch)
        margin = (clean.reward[0::2] - clean.reward[1::2]).double()
        nec = _forward(adapter, batch, src, members).double()
        suf = _forward(adapter, batch, src, set(universe) - members).double()
        nec_m, suf_m = nec[0::2] - nec[1::2], suf[0::2] - suf[1::2]
        out[rule] = {
            "n": len(rows), "key_size": len(members), "clean_margin_mean": float(margin.mean()),
            "planted_margin": abs(pd.WEIGHTS[rule]),
            "necessity_residual": float((nec_m.abs() / margin.abs()).mean()),
            "sufficiency_retained": float((suf_m / margin).mean()),
            "clean_margin_worst_deviation": float(((margin - abs(pd.WEIGHTS[rule])).abs() / abs(pd.WEIGHTS[rule])).max()),
        }
        out[rule]["passes"] = (out[rule]["necessity_residual"] <= VERIFY_TOLERANCE
                               and abs(out[rule]["sufficiency_retained"] - 1) <= VERIFY_TOLERANCE)
    return out


def verify_all(root: Path = PLANTED_DIR, seeds=SEEDS) -> dict:
    from measure.models.adapter import load
    from measure.runner.jsonio import read_jsonl

    per = {}
    for seed in seeds:
        folder = ensure_built(seed, root)
        adapter = load(str(folder), folder)
        key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
        per[f"planted-s{seed}"] = verify(adapter, read_jsonl(folder / "verify_twins.jsonl"), key, seed)
    deviations = [max(r["necessity_residual"], abs(r["sufficiency_retained"] - 1))
                  for rules in per.values() for r in rules.values()]
    return {"method": "resample ablation from held-out twins (measure.studies.planted.organisms.verify): a source "
                      "response of the same length from another held-out twin supplies the patched "
                      "components' outputs at every position, on both sides of the pair",
            "tolerance": VERIFY_TOLERANCE,
            "worst_deviation": max(deviations),
            "by_dimension": {dimension_name(int(org.rsplit("s", 1)[1]), rule): {
                "necessity_residual": r["necessity_residual"], "sufficiency_retained": r["sufficiency_retained"]}
                for org, rules in per.items() for rule, r in rules.items()},
            "all_pass": all(r["passes"] for rules in per.values() for r in rules.values()),
            "per_organism": per}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m measure.studies.planted.organisms", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("build", "verify"))
    parser.add_argument("--root", type=Path, default=PLANTED_DIR)
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        if args.command == "build":
            for seed in SEEDS:
                folder = organism_dir(seed, args.root)
                record = folder / "construction.json"
                expected = json.loads(record.read_text(encoding="utf-8"))["weights_sha256"] if record.exists() else None
                got = build(seed, folder)["weights_sha256"]
                if expected is not None and got != expected:
                    raise MeasureError(f"{record}: the rebuilt weights hash to {got[:12]}..., not {expected[:12]}...")
                print(f"planted-s{seed}: {folder} sha256 {got[:16]}")
            return 0
        result = verify_all(args.root)
        for organism, rules in result["per_organism"].items():
            for rule, r in rules.items():
                print(f"{organism} {rule:10s} necessity residual {r['necessity_residual']:.4f}  "
                      f"sufficiency retained {r['sufficiency_retained']:.4f}  "
                      f"{'pass' if r['passes'] else 'FAIL'}")
        print(f"worst deviation {result['worst_deviation']:.4f} (tolerance {VERIFY_TOLERANCE})")
        return 0 if result["all_pass"] else 1
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
