"""Condition encoders: turn a condition (class index, prompt, none) into ``encoder_hidden_states``."""

from __future__ import annotations

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import nn


class ClassEmbedding(ModelMixin, ConfigMixin):
    """Learned class tokens for a class-conditional UNet2DConditionModel.

    Index ``num_classes`` is the null class used for classifier-free guidance.
    ``forward(labels: (B,) long) -> (B, 1, embedding_dim)`` (one context token per image).
    """

    @register_to_config
    def __init__(self, num_classes: int = 10, embedding_dim: int = 64) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_classes + 1, embedding_dim)

    @property
    def null_class(self) -> int:
        return self.config.num_classes

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        return self.embedding(labels.long()).unsqueeze(1)
