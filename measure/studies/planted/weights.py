"""Weights of a planted organism, set from its design with plain Python floats.

The residual stream is a set of named channels (one direction each, drawn per organism):

- `one`: a constant ONE in every token's embedding. It dominates the stream's RMS, so every RMS
  norm divides by nearly the same number and acts as the identity (all gains are ONE/sqrt(d));
  designated components read their biases and thresholds from it.
- `bos`, `lex:*` (the rules' words), `topic` and `tsign` (the prompt's topic word and its sign),
  `val0..5` (filler values): written by the embedding.
- `mix0..5`: the filler values averaged over the prefix, written by the background heads of
  layer 0 and read by the background units of every MLP.
- `{rule}:{channel}`: what a rule's mechanism computes (counts, flags, marks).
- `reward`: the one channel the score head reads. Every background head and every MLP writes it.

A designated head queries from `one` and keys on its channels (logit 24 on a marked position,
12 on `<bos>`, 0 elsewhere), in the slowest rotary pair of the head, so from any position it
attends to the marked word when there is one and to `<bos>` otherwise; its value reads the
channel it moves. A background head has no query or key (it attends uniformly to its prefix)
and writes a vector of the averaged filler values into `reward`: a loud, margin-neutral push
from the words both sides share, and a noisy push from the one filler a twin swaps.
"""
from __future__ import annotations

import math

from measure.studies.planted import data as pdata
from measure.studies.planted.design import HEAD_DIM, HIDDEN, MLP, N_VAL

ONE = 1000.0
QK_DIM = 7                        # the slowest rotary pair of a head (pairs with QK_DIM + 8)
Q_GAIN, K_MARK, K_SINK = 8.0, 12.0, 6.0   # logits 24 on a marked position, 12 on <bos>
STEP_K, STEP_LO, STEP_HI = 50.0, 0.4, 0.6  # a step as the difference of two SiLU ramps
GATE_K = 40.0                     # gated products: silu(40 (x - 0.5)) is 20 at x = 1, ~0 at x = 0
LINEAR_GATE = 20.0                # a linear unit: silu(20) up to 4e-8


def silu(x: float) -> float:
    """The MLP's activation, x * sigmoid(x), in Python floats."""
    return x / (1.0 + math.exp(-x))


def _heads(d: dict) -> dict:
    """(layer, head) -> (key channels, {value channel: weight}, {written channel: amount})."""
    out = {}
    for rule, mech_name in d["rules"].items():
        w = pdata.WEIGHTS[rule]
        lex = list(pdata.LEX[rule])
        p = d["params"][rule]
        c = lambda name: f"{rule}:{name}"  # noqa: E731
        specs = {
            "c1": (lex, lex, {"reward": p.get("share", 0) * w}),
            "c2": (lex, lex, {"reward": (1 - p.get("share", 0)) * w}),
            "b1": (lex, lex, {"reward": w, c("count"): 1.0}),
            "b2": (lex, lex, {"reward": w, c("count"): 1.0}),
            "primary": (lex, lex, {"reward": w, c("done"): 1.0}),
            "fb_detector": (lex, lex, {c("flag"): 1.0}),
            "detector": (lex, lex, {c("flag"): 1.0}),
            "topic_gate": (["topic"], ["tsign"], {"reward": d["params"][rule].get("topic_push", 0.0),
                                                   c("tsign"): 1.0}),
            "late_mover": ([c("feat2")] if mech_name == "upstream_relay" else [c("feat")],
                           [c("feat2")] if mech_name == "upstream_relay" else [c("feat")], {"reward": w}),
            "relay": ([c("feat")], [c("feat")], {c("feat2"): 1.0}),
            "mover": (lex, lex, {c("moved"): 1.0}),
            "decoy": (lex, lex, {"reward": p.get("decoy_gain", 0) * w, c("dmark"): 1.0}),
        }
        for member, where in d["placement"][rule].items():
            if where[0] == "head":
                keys, values, writes = specs[member]
                out[(where[1], where[2])] = (keys, {v: 1.0 for v in values}, writes)
    return out


def _step_units(reads: dict, writes: dict) -> list:
    """Two units whose sum is `writes` times [sum of reads >= 0.5] (0.4 to 0.6 ramp)."""
    scale = STEP_K * (STEP_HI - STEP_LO)
    up = {"one": 1.0 / ONE}
    hi = {ch: STEP_K * w for ch, w in reads.items()}
    return [(dict(hi, one=-STEP_K * STEP_LO / ONE), up, {ch: a / scale for ch, a in writes.items()}),
            (dict(hi, one=-STEP_K * STEP_HI / ONE), up, {ch: -a / scale for ch, a in writes.items()})]


def _linear_unit(reads: dict, writes: dict) -> tuple:
    """One unit whose output is `writes` times the weighted sum of `reads`."""
    g = silu(LINEAR_GATE)
    return ({"one": LINEAR_GATE / ONE}, {ch: w / g for ch, w in reads.items()}, writes)


def _mlp_units(d: dict) -> dict:
    """layer -> [(gate {channel: w}, up {channel: w}, down {channel: w})], designated units."""
    out: dict = {}
    for rule, mech_name in d["rules"].items():
        w = pdata.WEIGHTS[rule]
        p = d["params"][rule]
        c = lambda name: f"{rule}:{name}"  # noqa: E731
        g = silu(GATE_K * 0.5)
        specs = {
            "repair": [_linear_unit({c("count"): 1.0}, {"reward": -w}),
                       *_step_units({c("count"): 1.0}, {"reward": w})],
            "fb_scorer": [({c("flag"): GATE_K, "one": -GATE_K * 0.5 / ONE},
                           {"one": 1.0 / ONE, c("done"): -1.0}, {"reward": w / g})],
            "gate_scorer": [({c("flag"): GATE_K, c("tsign"): GATE_K, "one": -GATE_K * 1.5 / ONE},
                             {"one": 1.0 / ONE}, {"reward": w / g}),
                            ({c("flag"): GATE_K, c("tsign"): -GATE_K, "one": -GATE_K * 1.5 / ONE},
                             {"one": 1.0 / ONE}, {"reward": w / g})],
            "early": _step_units({ch: 1.0 for ch in pdata.LEX[rule]}, {c("feat"): 1.0}),
            "scorer": _step_units({c("moved"): 1.0}, {"reward": w}),
            "canceller": [_linear_unit({c("dmark"): 1.0}, {"reward": -p.get("decoy_gain", 0) * w, c("cancelled"): 1.0})],
            "backup_canceller": [_linear_unit({c("dmark"): 1.0, c("cancelled"): -1.0},
                                              {"reward": -p.get("decoy_gain", 0) * w})],
        }
        for member, where in d["placement"][rule].items():
            if where[0] == "mlp":
                out.setdefault(where[1], []).extend(specs[member])
    return out


def _zeros(rows: int, cols: int) -> list[list[float]]:
    return [[0.0] * cols for _ in range(rows)]


def weights(d: dict) -> dict:
    """{parameter name: nested lists of floats} of the organism designed by `d`."""
    ch = d["channels"]
    vocab = pdata.vocabulary()
    lex_of = {}
    for rule in pdata.RULES:
        for word in pdata.WORDS[rule]:
            channels = pdata.LEX[rule]
            lex_of[word] = channels[0] if len(channels) == 1 else f"lex:{word}"
    embed = []
    for word in vocab:
        row = [0.0] * HIDDEN
        row[ch["one"]] = ONE
        if word == "<bos>":
            row[ch["bos"]] = 1.0
        if word in lex_of:
            row[ch[lex_of[word]]] = 1.0
        if word in d["topic_sign"]:
            row[ch["topic"]] = 1.0
            row[ch["tsign"]] = d["topic_sign"][word]
        for k, value in enumerate(d["word_values"].get(word, ())):
            row[ch[f"val{k}"]] = value
        embed.append(row)
    p = {"model.embed_tokens.weight": embed}
    heads = _heads(d)
    units = _mlp_units(d)
    layers, n_heads = d["layers"], d["heads"]
    width = n_heads * HEAD_DIM
    layer0_noise = [h for h in range(n_heads) if (0, h) not in heads]
    for i in range(layers):
        pre = f"model.layers.{i}."
        q, k, v, o = _zeros(width, HIDDEN), _zeros(width, HIDDEN), _zeros(width, HIDDEN), _zeros(HIDDEN, width)
        for h in range(n_heads):
            base = h * HEAD_DIM
            if (i, h) in heads:
                keys, values, writes = heads[(i, h)]
                q[base + QK_DIM][ch["one"]] = Q_GAIN / ONE
                for name in keys:
                    k[base + QK_DIM][ch[name]] = K_MARK
                k[base + QK_DIM][ch["bos"]] = K_SINK
                for name, weight in values.items():
                    v[base][ch[name]] = weight
                for name, amount in writes.items():
                    o[ch[name]][base] = amount
                continue
            vector = d["background_heads"][f"head_L{i}_H{h}"]["vector"]
            for kk in range(N_VAL):                  # dims 0..5 carry the averaged filler values
                v[base + kk][ch[f"val{kk}"]] = 1.0
                o[ch["reward"]][base + kk] = vector[kk]
                if i == 0:
                    o[ch[f"mix{kk}"]][base + kk] = 1.0 / len(layer0_noise)
        p[pre + "self_attn.q_proj.weight"] = q
        p[pre + "self_attn.k_proj.weight"] = k
        p[pre + "self_attn.v_proj.weight"] = v
        p[pre + "self_attn.o_proj.weight"] = o
        gate, up, down = _zeros(MLP, HIDDEN), _zeros(MLP, HIDDEN), _zeros(HIDDEN, MLP)
        vector = d["background_mlps"][f"mlp_L{i}"]["vector"]
        layer_units = [_linear_unit({f"mix{kk}": vector[kk] for kk in range(N_VAL)}, {"reward": 1.0})]
        layer_units += units.get(i, [])
        if len(layer_units) > MLP:
            raise ValueError(f"layer {i}: {len(layer_units)} MLP units designed, {MLP} available")
        for u, (g_w, up_w, dn) in enumerate(layer_units):
            for name, value in g_w.items():
                gate[u][ch[name]] += value
            for name, value in up_w.items():
                up[u][ch[name]] += value
            for name, value in dn.items():
                down[ch[name]][u] += value
        p[pre + "mlp.gate_proj.weight"] = gate
        p[pre + "mlp.up_proj.weight"] = up
        p[pre + "mlp.down_proj.weight"] = down
        gain = [ONE / math.sqrt(HIDDEN)] * HIDDEN
        p[pre + "input_layernorm.weight"] = list(gain)
        p[pre + "post_attention_layernorm.weight"] = list(gain)
    p["model.norm.weight"] = [ONE / math.sqrt(HIDDEN)] * HIDDEN
    score = [0.0] * HIDDEN
    score[ch["reward"]] = 1.0
    p["score.weight"] = [score]
    return p


def config_dict(d: dict, vocab_size: int, pad: int, bos: int, eos: int) -> dict:
    """The LlamaConfig fields of an organism of design `d`."""
    return {"vocab_size": vocab_size, "hidden_size": HIDDEN, "intermediate_size": MLP,
            "num_hidden_layers": d["layers"], "num_attention_heads": d["heads"],
            "num_key_value_heads": d["heads"], "head_dim": HEAD_DIM, "max_position_embeddings": 64,
            "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
            "num_labels": 1, "pad_token_id": pad, "bos_token_id": bos, "eos_token_id": eos,
            "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "hidden_act": "silu"}
