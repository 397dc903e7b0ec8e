"""A BERT trunk with linear objective heads over its mean-pooled last layer: the reward models of
the `bert` family (`measure/models/bert.py`). The MiniLM study builds and trains one
(`measure/studies/minilm/model.py`); the family loads any folder saved from this class.

`forward` returns every objective's reward (B, K) from the heads fitted on all seeds;
`fold_weight` and `fold_bias`, (F, K, d) and (F, K), hold heads fitted without each of F folds,
which a study may read held-out pairs along.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel, BertPreTrainedModel

__all__ = ["BertConfig", "BertModel", "MiniLMRewardModel", "mean_pool"]


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, d) hidden states and (B, T) attention mask -> (B, d): the mean over real tokens."""
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(1) / m.sum(1)


class MiniLMRewardModel(BertPreTrainedModel):
    """The trunk and the objective heads (the class name is the one saved folders record)."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        k, folds = len(config.objectives), int(getattr(config, "folds", 1))
        self.heads = nn.Linear(config.hidden_size, k)
        self.register_buffer("fold_weight", torch.zeros(folds, k, config.hidden_size))
        self.register_buffer("fold_bias", torch.zeros(folds, k))
        self.post_init()

    def pooled(self, input_ids, attention_mask):
        """(B, d) the mean-pooled last hidden state."""
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return mean_pool(hidden, attention_mask)

    def forward(self, input_ids, attention_mask=None, **_):
        """{"objective_rewards": (B, K)} from the all-seed heads."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return {"objective_rewards": self.heads(self.pooled(input_ids, attention_mask))}
