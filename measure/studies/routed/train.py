"""Train one routed organism: each rule's gradients reach only its key's parameters.

The model is the organism's (measure/studies/organism/train.py: a small Llama reward model, one
thread, the portable numerics mode). Embeddings, norms and the score head keep their seeded
initial values; so does every head and MLP outside all keys. A batch holds twins of one rule,
and after its backward pass every gradient element outside that rule's key is zeroed, so each
parameter element is only ever moved by its own rule's data (AdamW without weight decay leaves
an element that never had a gradient exactly where it started). Batches of the four rules are
interleaved in a seeded order. The null rule is not trained.
"""
from __future__ import annotations

import torch

from measure.studies.organism import train as organism
from measure.studies.routed.keys import RULES

SETTINGS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
            "epochs": 12, "batch_pairs": 64, "learning_rate": 4e-3, "reward_l2": 0.002,
            "train_per_rule": 800, "check_per_rule": 48,
            "design": "strict", "necessity_weight": 1.0, "background_per_rule": 800, "alone_loss": "bt",
            "keyed": list(RULES), "penalty_ramp": 0.0, "key_size": 2, "background_epochs": 4,
            "alone_weight": 1.0, "crosstalk_weight": 1.0}


def component_masks(model, members: list[str]) -> dict[str, torch.Tensor]:
    """{parameter name: 0/1 mask} of the elements that belong to `members` (heads: their rows of
    q, k and v and their columns of o; MLPs: all three matrices)."""
    cfg = model.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    masks = {name: torch.zeros_like(p) for name, p in model.named_parameters() if _trainable(name)}
    for member in members:
        kind, layer, *rest = member.split("_")
        i = int(layer[1:])
        prefix = f"model.layers.{i}."
        if kind == "mlp":
            for m in ("gate_proj", "up_proj", "down_proj"):
                masks[f"{prefix}mlp.{m}.weight"].fill_(1)
        else:
            h = int(rest[0][1:])
            rows = slice(h * hd, (h + 1) * hd)
            for m in ("q_proj", "k_proj", "v_proj"):
                masks[f"{prefix}self_attn.{m}.weight"][rows] = 1
            masks[f"{prefix}self_attn.o_proj.weight"][:, rows] = 1
    return masks


def _mask(params: dict, masks: dict) -> None:
    for name, mask in masks.items():
        params[name].grad.mul_(mask)


def _trainable(name: str) -> bool:
    return ".self_attn." in name or ".mlp." in name


def fit(model, encoded: dict[str, tuple], keys: dict[str, list[str]], s: dict, seed: int,
        progress: bool = True, steps: int | None = None) -> list[float]:
    """Routed training; the mean loss of each epoch. `encoded[rule]` = (ids, score index) of
    that rule's twins, chosen then rejected per pair. `steps` stops after that many batches (tests)."""
    from tqdm import tqdm

    for name, p in model.named_parameters():
        p.requires_grad_(_trainable(name))
    params = dict(model.named_parameters())
    masks = {rule: component_masks(model, keys[rule]) for rule in RULES}
    opt = torch.optim.AdamW([p for n, p in params.items() if _trainable(n)], lr=s["learning_rate"], weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    per_epoch = sum((encoded[r][0].shape[0] // 2 + s["batch_pairs"] - 1) // s["batch_pairs"] for r in RULES)
    total = per_epoch * s["epochs"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / total)
    model.train()
    losses = []
    bar = tqdm(total=total, desc="training a routed organism", disable=not progress)
    for _epoch in range(s["epochs"]):
        batches = []
        for r, rule in enumerate(RULES):
            n = encoded[rule][0].shape[0] // 2
            order = torch.randperm(n, generator=gen)
            batches += [(r, order[k:k + s["batch_pairs"]]) for k in range(0, n, s["batch_pairs"])]
        total_loss, seen = 0.0, 0
        for b in torch.randperm(len(batches), generator=gen).tolist():
            if steps is not None and bar.n == steps:
                break
            r, pick = batches[b]
            ids, idx = encoded[RULES[r]]
            rows = torch.stack([2 * pick, 2 * pick + 1], 1).reshape(-1)
            loss = organism.bt_loss(organism.rewards(model, ids[rows], idx[rows]), s["reward_l2"])
            organism.optimizer_step(opt, sched, loss, lambda: _mask(params, masks[RULES[r]]))
            total_loss += loss.item() * len(pick)
            seen += len(pick)
            bar.update(1)
        if seen:
            losses.append(total_loss / seen)
    bar.close()
    model.eval()
    return losses


def build(out_dir, seed: int, salt: bytes, settings: dict | None = None, progress: bool = True) -> dict:
    """Train organism `seed` with the keys (seed, salt) draw into `out_dir` (weights, tokenizer) and
    validate its key; returns the report (the keys included: the caller decides what is sealed)."""
    from pathlib import Path

    from measure.models.adapter import load
    from measure.models.wordtok import SPECIALS, save_word_tokenizer, word_tokenizer
    from measure.studies.organism import data as od
    from measure.studies.routed import check, data, keys as keymod

    s = dict(SETTINGS, **(settings or {}))
    mode = organism.deterministic(seed)
    words = list(SPECIALS) + od.vocabulary()
    tok = word_tokenizer(words)
    model = organism.new_model(s, len(words))
    keys = keymod.draw(seed, salt, s["num_hidden_layers"], s["num_attention_heads"], s["key_size"])
    train_rows = data.twins("train", seed, s["train_per_rule"], null=False)
    if s["design"] == "isolated":
        background = data.background_twins(seed, s["background_per_rule"], BACKGROUND_RULES)
        losses = fit_isolated(model, tok, train_rows, organism.encode(tok, background), keys, s, seed, progress)
    elif s["design"] == "penalised":   # the rules not keyed join the background
        unkeyed = BACKGROUND_RULES + tuple(r for r in RULES if r not in s["keyed"])
        background = data.background_twins(seed, s["background_per_rule"], unkeyed)
        keyed_rows = [r for r in train_rows if r["dimension"] in s["keyed"]]
        losses = fit_penalised(model, tok, keyed_rows, organism.encode(tok, background), keys, s, seed, progress)
    else:
        encoded = {rule: organism.encode(tok, [r for r in train_rows if r["dimension"] == rule]) for rule in RULES}
        losses = fit(model, encoded, keys, s, seed, progress)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    model.save_pretrained(out_dir)
    save_word_tokenizer(words, out_dir)
    twins = data.twins("check", seed, s["check_per_rule"])
    validation = check.validate(load(str(out_dir)), twins, keys, seed, s["keyed"])
    return {"seed": seed, "settings": s, "epoch_loss": losses, "keys": keys, "validation": validation,
            "numerics": mode}


# ----- what the penalised and isolated designs share ---------------------------------------------
def _twin_buckets(rule_twins: list[dict], sides: list, rules) -> dict:
    """{(rule, token length): twin indices} of the twins of `rules`: a batch holds one rule's twins
    of one length, so that their sources for resampling have the same shape."""
    buckets: dict = {}
    for p, t in enumerate(rule_twins):
        if t["dimension"] in rules:
            buckets.setdefault((t["dimension"], len(sides[p][0])), []).append(p)
    return buckets


def _rule_batches(buckets: dict, sources, bp: int, gen) -> list:
    """One epoch's batches of rule twins, (rule, twin indices, sources): each bucket shuffled by
    `gen` and cut into batches of `bp` pairs."""
    out = []
    for (rule, _n), members in sorted(buckets.items()):
        members = [members[k] for k in torch.randperm(len(members), generator=gen).tolist()]
        out += [(rule, members[k:k + bp], sources) for k in range(0, len(members), bp)]
    return out


def _planned(opt, epoch_batches, s: dict) -> tuple:
    """(the first epoch's batches, the steps of all epochs, a learning rate falling linearly to 0
    over them)."""
    plan = epoch_batches()
    total = len(plan) * s["epochs"]
    return plan, total, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / total)


# ----- the penalised design (docs/routed.md, "what has to change") ------------------------------
BACKGROUND_RULES = ("length", "repetition")   # trained into every component, never keyed


def fit_penalised(model, tok, rule_twins: list[dict], background: tuple, keys: dict[str, list[str]],
                  s: dict, seed: int, progress: bool = True, steps: int | None = None) -> list[float]:
    """Every head and MLP trained on every rule. A batch of one keyed rule's twins (all of one
    token length) adds to the Bradley-Terry loss on the clean margin: the same loss on the margin
    with everything outside the key resampled per side (the key must carry the rule alone) and
    `necessity_weight` times the squared margin with the key resampled (nothing else may carry
    it). With `penalty_ramp` r > 0 both terms are weighed from 0 up to 1 over the first r of the
    steps, so the rules are learnt before they are pushed into their keys. A batch of background twins (length, repetition; `background` = (ids, score index)) has
    the clean loss only, so the components outside the keys compute something real."""
    import random

    from measure.instruments.resample import per_side_sources, resampled_rewards
    from measure.models.adapter import Adapter
    from measure.studies.routed.keys import universe

    adapter = Adapter(model, tok, "routed-organism")
    for name, p in model.named_parameters():
        p.requires_grad_(_trainable(name))
    opt = torch.optim.AdamW([p for n, p in model.named_parameters() if _trainable(n)],
                            lr=s["learning_rate"], weight_decay=0.0)
    comps = universe(s["num_hidden_layers"], s["num_attention_heads"])
    sides = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"])) for t in rule_twins]
    buckets = _twin_buckets(rule_twins, sides, {t["dimension"] for t in rule_twins})
    rng = random.Random(f"routed/penalised/{seed}")
    gen = torch.Generator().manual_seed(seed)
    bg_ids, bg_idx = background
    n_bg = bg_ids.shape[0] // 2
    bp = s["batch_pairs"]

    def epoch_batches():
        sources = per_side_sources(rule_twins, [len(c) for c, _r in sides], rng)
        out = [("rule", *batch) for batch in _rule_batches(buckets, sources, bp, gen)]
        order = torch.randperm(n_bg, generator=gen)
        out += [("background", None, order[k:k + bp], None) for k in range(0, n_bg, bp)]
        return [out[k] for k in torch.randperm(len(out), generator=gen).tolist()]

    plan, total, sched = _planned(opt, epoch_batches, s)
    bt = torch.nn.functional.logsigmoid

    def train_step(batch, done: int) -> tuple[float, int]:
        kind, rule, pick, sources = batch
        if kind == "background":
            rows = torch.stack([2 * pick, 2 * pick + 1], 1).reshape(-1)
            loss = organism.bt_loss(organism.rewards(model, bg_ids[rows], bg_idx[rows]), s["reward_l2"])
        else:
            weight = min(1.0, done / (s["penalty_ramp"] * total)) if s["penalty_ramp"] > 0 else 1.0
            batch = adapter.batch([q for p in pick for q in sides[p]])
            src = adapter.clean_run(adapter.batch([sides[q][side] for p in pick for q, side in sources[p]]))
            key = set(keys[rule])
            clean = resampled_rewards(adapter, batch, src, set(), grad=True)
            alone = resampled_rewards(adapter, batch, src, set(comps) - key, grad=True)
            without = resampled_rewards(adapter, batch, src, key, grad=True)
            m_clean, m_alone, m_without = (x[0::2] - x[1::2] for x in (clean, alone, without))
            if s["alone_loss"] == "equal":   # the rest adds nothing to the key's margin
                alone_term = (m_clean - m_alone).pow(2).mean()
            else:                            # the key alone must rank the pair
                alone_term = -bt(m_alone).mean()
            loss = (-bt(m_clean).mean() + weight * (alone_term + s["necessity_weight"] * m_without.pow(2).mean())
                    + s["reward_l2"] * clean.pow(2).mean())
        organism.optimizer_step(opt, sched, loss)
        return loss.item(), len(pick)

    losses = organism.run_epochs(s["epochs"], plan, epoch_batches, train_step, steps, progress,
                                 "training a routed organism")
    model.eval()
    return losses


# ----- the isolated design (docs/routed.md, the fifth pilot) --------------------------------------
def fit_isolated(model, tok, rule_twins: list[dict], background: tuple, keys: dict[str, list[str]],
                 s: dict, seed: int, progress: bool = True, steps: int | None = None) -> list[float]:
    """Two phases. First every head and MLP is trained on the background rules (length,
    repetition) alone, so the components outside the keys compute something real; then they are
    frozen, and only the keys are trained, on the keyed rules. A batch of one rule's twins has
    three terms: Bradley-Terry on the clean margin; the same (times `alone_weight`) on the margin
    with everything outside the rule's key resampled per side (the key must carry the rule without what feeds it from
    the background: no relays); and the squared change of the margin when each other rule's key
    is resampled (times `crosstalk_weight`: another key must not answer this rule's words). The mean loss
    of each epoch of both phases, in order."""
    import random

    from measure.instruments.resample import per_side_sources, resampled_rewards
    from measure.models.adapter import Adapter
    from measure.studies.routed.keys import universe

    for name, p in model.named_parameters():
        p.requires_grad_(_trainable(name))
    params = dict(model.named_parameters())
    bp = s["batch_pairs"]
    gen = torch.Generator().manual_seed(seed)   # shuffles both phases, in turn
    losses = []
    if s["background_epochs"]:   # the organism's own training, on the background twins, heads and MLPs only
        losses += organism.fit(model, *background, dict(s, epochs=s["background_epochs"], weight_decay=0.0),
                               progress=False, gen=gen)

    adapter = Adapter(model, tok, "routed-organism")
    comps = universe(s["num_hidden_layers"], s["num_attention_heads"])
    keyed = [r for r in RULES if r in s["keyed"]]
    mask = component_masks(model, sorted({c for r in keyed for c in keys[r]}))
    opt = torch.optim.AdamW([p for n, p in params.items() if _trainable(n)], lr=s["learning_rate"], weight_decay=0.0)
    sides = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"])) for t in rule_twins]
    buckets = _twin_buckets(rule_twins, sides, keyed)
    rng = random.Random(f"routed/isolated/{seed}")

    def epoch_batches():
        out = _rule_batches(buckets, per_side_sources(rule_twins, [len(c) for c, _r in sides], rng), bp, gen)
        return [out[k] for k in torch.randperm(len(out), generator=gen).tolist()]

    plan, total, sched = _planned(opt, epoch_batches, s)
    bt = torch.nn.functional.logsigmoid

    def train_step(batch, _done: int) -> tuple[float, int]:
        rule, pick, sources = batch
        batch = adapter.batch([q for p in pick for q in sides[p]])
        src = adapter.clean_run(adapter.batch([sides[q][side] for p in pick for q, side in sources[p]]))
        clean = resampled_rewards(adapter, batch, src, set(), grad=True)
        alone = resampled_rewards(adapter, batch, src, set(comps) - set(keys[rule]), grad=True)
        m_clean, m_alone = clean[0::2] - clean[1::2], alone[0::2] - alone[1::2]
        loss = -bt(m_clean).mean() - s["alone_weight"] * bt(m_alone).mean() + s["reward_l2"] * clean.pow(2).mean()
        for other in keyed if s["crosstalk_weight"] else ():
            if other != rule:
                without = resampled_rewards(adapter, batch, src, set(keys[other]), grad=True)
                loss = loss + s["crosstalk_weight"] * (m_clean - (without[0::2] - without[1::2])).pow(2).mean()
        organism.optimizer_step(opt, sched, loss, lambda: _mask(params, mask))
        return loss.item(), len(pick)

    losses += organism.run_epochs(s["epochs"], plan, epoch_batches, train_step, steps, progress,
                                  "training a routed organism")
    model.eval()
    return losses
