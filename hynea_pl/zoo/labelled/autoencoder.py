"""The zoo's image autoencoders: a small diffusers ``AutoencoderKL`` (MNIST: 1x32x32 <-> 4x8x8) or ``VQModel``."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL, VQModel


def to_model_range(images: torch.Tensor) -> torch.Tensor:
    """[0, 1] -> [-1, 1], the range diffusers autoencoders work in."""
    return images * 2 - 1


def to_image_range(x: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> [0, 1], clamped."""
    return ((x + 1) / 2).clamp(0, 1)


class AutoencoderTraining(L.LightningModule):
    """Trains an autoencoder with MSE + ``l1_weight`` * L1 + a regulariser, AdamW and cosine decay.

    The regulariser is ``kl_weight`` * KL for an ``AutoencoderKL`` (decoding a posterior sample) and ``vq_weight``
    * the commitment + codebook loss that ``VQModel`` returns for a ``VQModel`` (decoding the quantised latents).
    With ``ink_weight > 0`` the MSE of each pixel whose target is ink (> ``ink_threshold`` in [0, 1]) counts
    ``1 + ink_weight`` times: images of sparse strokes on black otherwise first train toward all black.
    The learning rate decays along a cosine from ``lr``; with ``warmup_fraction > 0`` it follows a one-cycle
    schedule instead (from ``lr / 25`` up to ``lr`` over that fraction of the steps, then a cosine down).
    """

    def __init__(
        self, vae: AutoencoderKL | VQModel, lr: float, max_steps: int, l1_weight: float = 0.5,
        kl_weight: float = 1e-5, vq_weight: float = 1.0, ink_weight: float = 0.0, ink_threshold: float = 0.1,
        warmup_fraction: float = 0.0,
    ) -> None:
        super().__init__()
        self.vae = vae
        self.lr = lr
        self.max_steps = max_steps
        self.l1_weight = l1_weight
        self.kl_weight = kl_weight
        self.vq_weight = vq_weight
        self.ink_weight, self.ink_threshold = ink_weight, ink_threshold
        self.warmup_fraction = warmup_fraction

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        x = to_model_range(batch[0])
        if isinstance(self.vae, VQModel):
            decoded = self.vae(x)
            recon, regulariser = decoded.sample, self.vq_weight * decoded.commit_loss.mean()
        else:
            posterior = self.vae.encode(x).latent_dist
            recon, regulariser = self.vae.decode(posterior.sample()).sample, self.kl_weight * posterior.kl().mean()
        if self.ink_weight > 0:
            weight = 1 + self.ink_weight * (batch[0] > self.ink_threshold).float()
            mse = (weight * (recon - x).square()).mean()
        else:
            mse = F.mse_loss(recon, x)
        loss = mse + self.l1_weight * F.l1_loss(recon, x) + regulariser
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.vae.parameters(), lr=self.lr)
        if self.warmup_fraction > 0:
            scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, self.lr, total_steps=self.max_steps,
                                                            pct_start=self.warmup_fraction)
        else:
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@torch.no_grad()
def encode_latents(vae: AutoencoderKL | VQModel, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Unscaled latents of images in [0, 1]: an ``AutoencoderKL``'s posterior means (MNIST ``(N, 1, 32, 32)`` ->
    ``(N, 4, 8, 8)``), a ``VQModel``'s pre-quantisation latents."""
    vae.eval()
    latents = []
    for i in range(0, len(images), batch_size):
        encoded = vae.encode(to_model_range(images[i : i + batch_size]))
        latents.append(encoded.latent_dist.mean if hasattr(encoded, "latent_dist") else encoded.latents)
    return torch.cat(latents)


@torch.no_grad()
def reconstruct(vae: AutoencoderKL | VQModel, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Decode the latents of :func:`encode_latents` (a ``VQModel`` quantises them): reconstructions in [0, 1] of
    images in [0, 1]."""
    latents = encode_latents(vae, images, batch_size)
    return torch.cat(
        [to_image_range(vae.decode(latents[i : i + batch_size]).sample) for i in range(0, len(latents), batch_size)]
    )
