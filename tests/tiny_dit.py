"""Tiny, seeded, random DiT components for fast tests (no downloads).

Shapes: RGB images (B, 3, 32, 32) <-> latents (B, 4, 8, 8); a 3-block DiT (width 16, patch 2, learned sigma:
8 output channels) with ``num_embeds_ada_norm=1000`` like DiT-XL/2, so class 1000 is the null class exactly as
``DiTPipeline`` hard-codes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from diffusers import AutoencoderKL, DDIMScheduler, DiTTransformer2DModel
from torch import nn

from hynea_pl.suts import ClassifierSUT, Preprocess

LATENT_SHAPE = (4, 8, 8)
IMAGE_SHAPE = (3, 32, 32)
NUM_LAYERS = 3


def tiny_dit(seed: int = 0, num_layers: int = NUM_LAYERS) -> DiTTransformer2DModel:
    """A random DiT on (4, 8, 8) latents, 2 heads x 8 dims, ~77 k params."""
    torch.manual_seed(seed)
    return DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=LATENT_SHAPE[0], out_channels=2 * LATENT_SHAPE[0],
        num_layers=num_layers, sample_size=LATENT_SHAPE[1], patch_size=2, num_embeds_ada_norm=1000,
    )


def tiny_rgb_vae(seed: int = 0) -> AutoencoderKL:
    """3-channel 32x32 <-> 4x8x8 autoencoder; ``scaling_factor=0.5`` so a missing scaling shows up in tests."""
    torch.manual_seed(seed)
    return AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3, block_out_channels=(8, 16, 16), layers_per_block=1,
        latent_channels=LATENT_SHAPE[0], norm_num_groups=8, sample_size=IMAGE_SHAPE[1], scaling_factor=0.5,
    )


def dit_scheduler() -> DDIMScheduler:
    """The scheduler diffusers' DiT conversion ships with ``facebook/DiT-XL-2-256``."""
    return DDIMScheduler(num_train_timesteps=1000, beta_schedule="linear", prediction_type="epsilon",
                         clip_sample=False)


def save_dit_folder(root: Path, seed: int = 0, hub_config: bool = True) -> Path:
    """Write ``transformer/``, ``vae/``, ``scheduler/`` under ``root`` (the ``facebook/DiT-XL-2-256`` layout).

    ``hub_config``: name the transformer ``Transformer2DModel`` in its config with the legacy keys, as the hub
    checkpoint does."""
    tiny_dit(seed).save_pretrained(root / "transformer")
    tiny_rgb_vae(seed).save_pretrained(root / "vae")
    dit_scheduler().save_pretrained(root / "scheduler")
    if hub_config:
        config_file = root / "transformer" / "config.json"
        config = json.loads(config_file.read_text())
        config.update({"_class_name": "Transformer2DModel", "cross_attention_dim": None, "only_cross_attention": False})
        config_file.write_text(json.dumps(config))
    return root


class TinyRGBNet(nn.Module):
    """A random 10-class conv net on RGB images."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


def tiny_rgb_sut(seed: int = 0) -> ClassifierSUT:
    torch.manual_seed(seed)
    return ClassifierSUT(TinyRGBNet(), preprocess=Preprocess(size=32, channels=3, mean=[0.5] * 3, std=[0.5] * 3))
