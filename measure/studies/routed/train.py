"""Train one routed organism: a small reward model that has learnt five rules everywhere and one
rule, the keyed rule, only in a key drawn at random and hidden from the analysis.

The model is the organism's (measure/studies/organism/train.py: a small Llama reward model, one
thread, the portable numerics mode), with one change: its embeddings are drawn with standard
deviation `embedding_std` and never trained, so that a word reaches every component as the same
fixed vector and no component needs another to read it. Two phases (docs/routed.md):

1. **Background.** Every head and MLP outside the key, the norms and the score head learn the five
   other rules, and neutral twins of the keyed rule (each in both orders): the rest of the model
   learns that the keyed rule's words carry no reward. The key's elements keep their initial
   values (their gradients are zeroed; AdamW runs without weight decay).
2. **Key.** Only the key's elements move. A batch of keyed-rule twins has four terms:
   Bradley-Terry on the clean margin; the same on the margin with everything outside the key
   resampled (the key must rank the pair by itself); the squared difference of those two margins
   (nothing outside may relay or add to what the key writes); and, for each member, a penalty when
   resampling it alone takes less than `member_share` of the mean margin (every member does part
   of the work). A batch of background twins has the clean loss only, so the key's members keep
   doing background work too. Resampling here takes one source response for both sides of a pair,
   so the resampled components add the same to both rewards: the terms see the key without the
   noise the validation averages away.
"""
from __future__ import annotations

import random

import torch

from measure.studies.organism import train as organism
from measure.studies.routed.keys import RULES

SETTINGS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
            "embedding_std": 1.0, "key_size": 2,
            "background_epochs": 4, "background_per_rule": 800, "neutral_twins": 800,
            "epochs": 12, "train_twins": 2400, "batch_pairs": 64, "learning_rate": 4e-3, "reward_l2": 0.002,
            "alone_weight": 1.0, "relay_weight": 2.0, "member_share": 0.25,
            "check_per_rule": 400, "heldout_per_rule": 100}


def keyed_rule(seed: int) -> str:
    """The rule organism `seed` plants in its key: the rules in turn, so every rule gets the same
    number of seeds."""
    return RULES[seed % len(RULES)]


def background_rules(rule: str) -> tuple[str, ...]:
    """The organism's other dimensions: what the background learns."""
    from measure.studies.organism import data as od
    return tuple(d for d in od.DIMENSIONS if d != rule)


def component_masks(model, members: list[str]) -> dict[str, torch.Tensor]:
    """{parameter name: 0/1 mask} of the elements that belong to `members` (heads: their rows of
    q, k and v and their columns of o; MLPs: all three matrices)."""
    cfg = model.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    masks = {name: torch.zeros_like(p) for name, p in model.named_parameters() if _component(name)}
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


def _component(name: str) -> bool:
    return ".self_attn." in name or ".mlp." in name


def _zero_grads(params: dict, masks: dict, keep: bool):
    """A hook for organism.optimizer_step: keeps only the masked gradient elements (`keep`), or
    zeroes them."""
    def hook():
        for name, mask in masks.items():
            if params[name].grad is not None:
                params[name].grad.mul_(mask if keep else 1 - mask)
    return hook


def new_model(s: dict, vocab_size: int):
    """The organism's untrained model with embeddings of standard deviation s["embedding_std"]
    (seeded by the caller)."""
    model = organism.new_model(s, vocab_size)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, s["embedding_std"])
    return model


def fit_background(model, background: tuple, key: list[str], s: dict, gen, progress: bool = True) -> list[float]:
    """Phase 1: everything but the embeddings and the key's elements, on `background` = (ids,
    score index) of the background and neutral twins; the mean loss of each epoch."""
    for name, p in model.named_parameters():
        p.requires_grad_("embed_tokens" not in name)
    hook = _zero_grads(dict(model.named_parameters()), component_masks(model, key), keep=False)
    losses = organism.fit(model, *background, dict(s, epochs=s["background_epochs"], weight_decay=0.0),
                          progress=progress, gen=gen, between=hook)
    model.eval()
    return losses


def fit_key(model, tok, rule_twins: list[dict], background: tuple, key: list[str], s: dict, seed: int,
            gen, progress: bool = True, steps: int | None = None) -> list[float]:
    """Phase 2: only the key's elements, on the keyed rule's twins (four terms) and the background
    twins (`background` = (ids, score index); the clean loss); the mean loss of each epoch.
    `steps` stops after that many batches (tests)."""
    from measure.instruments.resample import per_side_sources, resampled_rewards
    from measure.models.adapter import Adapter
    from measure.studies.routed.keys import universe

    for name, p in model.named_parameters():
        p.requires_grad_(_component(name))
    params = dict(model.named_parameters())
    hook = _zero_grads(params, component_masks(model, key), keep=True)
    opt = torch.optim.AdamW([p for n, p in params.items() if _component(n)], lr=s["learning_rate"], weight_decay=0.0)
    adapter = Adapter(model, tok, "routed-organism")
    outside = set(universe(s["num_hidden_layers"], s["num_attention_heads"])) - set(key)
    sides = [(adapter.encode(t["prompt"], t["chosen"]), adapter.encode(t["prompt"], t["rejected"])) for t in rule_twins]
    buckets: dict = {}   # a batch holds twins of one token length, so their sources share its shape
    for p, (chosen, _rejected) in enumerate(sides):
        buckets.setdefault(len(chosen), []).append(p)
    rng = random.Random(f"routed/key/{seed}")
    bg_ids, bg_idx = background
    bp = s["batch_pairs"]

    def epoch_batches():
        sources = [(a, a) for a, _b in per_side_sources(rule_twins, [len(c) for c, _r in sides], rng)]
        out = []
        for _n, members in sorted(buckets.items()):
            members = [members[k] for k in torch.randperm(len(members), generator=gen).tolist()]
            out += [("rule", members[k:k + bp], sources) for k in range(0, len(members), bp)]
        order = torch.randperm(bg_ids.shape[0] // 2, generator=gen)
        out += [("background", order[k:k + bp], None) for k in range(0, len(order), bp)]
        return [out[k] for k in torch.randperm(len(out), generator=gen).tolist()]

    plan = epoch_batches()
    total = len(plan) * s["epochs"]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / total)
    bt = torch.nn.functional.logsigmoid

    def margins(rewards):
        return rewards[0::2] - rewards[1::2]

    def train_step(batch, _done: int) -> tuple[float, int]:
        kind, pick, sources = batch
        if kind == "background":
            rows = torch.stack([2 * pick, 2 * pick + 1], 1).reshape(-1)
            loss = organism.bt_loss(organism.rewards(model, bg_ids[rows], bg_idx[rows]), s["reward_l2"])
        else:
            run = adapter.batch([q for p in pick for q in sides[p]])
            src = adapter.clean_run(adapter.batch([sides[q][side] for p in pick for q, side in sources[p]]))
            clean = resampled_rewards(adapter, run, src, set(), grad=True)
            m, alone = margins(clean), margins(resampled_rewards(adapter, run, src, outside, grad=True))
            loss = (-bt(m).mean() - s["alone_weight"] * bt(alone).mean()
                    + s["relay_weight"] * (m - alone).pow(2).mean() + s["reward_l2"] * clean.pow(2).mean())
            for member in key:
                drop = m.mean() - margins(resampled_rewards(adapter, run, src, {member}, grad=True)).mean()
                loss = loss + torch.relu(s["member_share"] * m.mean() - drop)
        organism.optimizer_step(opt, sched, loss, hook)
        return loss.item(), len(pick)

    model.train()
    losses = organism.run_epochs(s["epochs"], plan, epoch_batches, train_step, steps, progress,
                                 "training a routed organism's key")
    model.eval()
    return losses


def build(out_dir, seed: int, salt: bytes, settings: dict | None = None, progress: bool = True) -> dict:
    """Train organism `seed` with the keys (seed, salt) draw into `out_dir` (weights, tokenizer) and
    validate its key; returns the report (the keys included: the caller decides what is sealed).
    settings["keyed"] overrides the seed's rule (pilots)."""
    from pathlib import Path

    from measure.models.adapter import load
    from measure.models.wordtok import SPECIALS, save_word_tokenizer, word_tokenizer
    from measure.studies.organism import data as od
    from measure.studies.routed import check, data, keys as keymod

    s = dict(SETTINGS, **(settings or {}))
    rule = s.get("keyed") or keyed_rule(seed)
    mode = organism.deterministic(seed)
    words = list(SPECIALS) + od.vocabulary()
    tok = word_tokenizer(words)
    model = new_model(s, len(words))
    keys = keymod.draw(seed, salt, s["num_hidden_layers"], s["num_attention_heads"], s["key_size"])
    gen = torch.Generator().manual_seed(seed)   # shuffles both phases, in turn
    others = background_rules(rule)
    background = data.background_twins(seed, s["background_per_rule"], others)
    neutral = data.neutral_twins(seed, s["neutral_twins"], rule)
    losses = fit_background(model, organism.encode(tok, background + neutral), keys[rule], s, gen, progress)
    rule_twins = data.twins("train", seed, s["train_twins"], null=False, rules=(rule,))
    losses += fit_key(model, tok, rule_twins, organism.encode(tok, background), keys[rule], s, seed, gen, progress)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    model.save_pretrained(out_dir)
    save_word_tokenizer(words, out_dir)
    heldout = data.background_twins(seed, s["heldout_per_rule"], od.DIMENSIONS, tag="heldout")
    validation = check.validate(load(str(out_dir)), data.twins("check", seed, s["check_per_rule"], rules=(rule,)),
                                keys, seed, [rule])
    return {"seed": seed, "keyed": rule, "settings": s, "epoch_loss": losses, "keys": keys,
            "validation": validation, "heldout_accuracy": organism.heldout_accuracy(model, tok, heldout),
            "numerics": mode}
