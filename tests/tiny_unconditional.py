"""Tiny, seeded, random components of the unconditional LDM family (no downloads).

Shapes: latents (B, 3, 8, 8) <-> images (B, 3, 32, 32) (a VQ-f4 model, like ``CompVis/ldm-celebahq-256`` at 64 ->
256). ``save_tiny_checkpoint`` writes them in ``LDMPipeline``'s folder layout (``unet/``, ``vqvae/``,
``scheduler/``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import DDIMScheduler, UNet2DModel, VQModel
from torch import nn

LATENT_SHAPE = (3, 8, 8)
IMAGE_SHAPE = (3, 32, 32)
SCALING_FACTOR = 0.7  # explicit, so that dividing by it (as LDMPipeline does) is exercised


def tiny_unet2d(seed: int = 0) -> UNet2DModel:
    """Unconditional UNet on (3, 8, 8) latents: a plain and an attention down block, as the CelebA-HQ LDM has."""
    torch.manual_seed(seed)
    return UNet2DModel(
        sample_size=LATENT_SHAPE[1],
        in_channels=LATENT_SHAPE[0],
        out_channels=LATENT_SHAPE[0],
        block_out_channels=(16, 32),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
        attention_head_dim=8,
    )


def tiny_vqvae(seed: int = 0, scaling_factor: float | None = SCALING_FACTOR) -> VQModel:
    """3x32x32 <-> 3x8x8 VQ autoencoder; the codebook is drawn N(0, 1) (diffusers' init, U(-1/n, 1/n), would map
    every latent to a handful of near-zero codes). ``scaling_factor=None`` leaves it to diffusers' default."""
    torch.manual_seed(seed)
    extra = {} if scaling_factor is None else {"scaling_factor": scaling_factor}
    vq = VQModel(
        in_channels=IMAGE_SHAPE[0],
        out_channels=IMAGE_SHAPE[0],
        down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3,
        block_out_channels=(8, 16, 16),
        layers_per_block=1,
        latent_channels=LATENT_SHAPE[0],
        num_vq_embeddings=64,
        norm_num_groups=8,
        sample_size=IMAGE_SHAPE[1],
        **extra,
    )
    with torch.no_grad():
        vq.quantize.embedding.weight.normal_()
    return vq


def tiny_ddim() -> DDIMScheduler:
    """DDIM with the CelebA-HQ LDM's training schedule (scaled linear 0.0015 -> 0.0195)."""
    return DDIMScheduler(num_train_timesteps=1000, beta_schedule="scaled_linear", beta_start=0.0015,
                         beta_end=0.0195, clip_sample=False)


def save_tiny_checkpoint(root: Path, seed: int = 0) -> Path:
    """Write a tiny checkpoint in LDMPipeline's layout under ``root``; returns ``root``."""
    tiny_unet2d(seed).save_pretrained(root / "unet")
    tiny_vqvae(seed).save_pretrained(root / "vqvae")
    tiny_ddim().save_pretrained(root / "scheduler")
    return root


class TinyAttributeNet(nn.Module):
    """A random multi-label net: images (B, 3, H, W) -> ``num_logits`` logits."""

    def __init__(self, num_logits: int = 4, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                 nn.Flatten(), nn.Linear(32, num_logits))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)
