"""The zoo's image autoencoder: a small diffusers ``AutoencoderKL`` (1x32x32 <-> 4x8x8)."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL


def to_model_range(images: torch.Tensor) -> torch.Tensor:
    """[0, 1] -> [-1, 1], the range diffusers autoencoders work in."""
    return images * 2 - 1


def to_image_range(x: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> [0, 1], clamped."""
    return ((x + 1) / 2).clamp(0, 1)


class AutoencoderTraining(L.LightningModule):
    """Trains an ``AutoencoderKL`` with MSE + ``l1_weight`` * L1 + ``kl_weight`` * KL, AdamW and cosine decay."""

    def __init__(
        self, vae: AutoencoderKL, lr: float, max_steps: int, l1_weight: float = 0.5, kl_weight: float = 1e-5
    ) -> None:
        super().__init__()
        self.vae = vae
        self.lr = lr
        self.max_steps = max_steps
        self.l1_weight = l1_weight
        self.kl_weight = kl_weight

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x = to_model_range(batch[0])
        posterior = self.vae.encode(x).latent_dist
        recon = self.vae.decode(posterior.sample()).sample
        loss = (
            F.mse_loss(recon, x)
            + self.l1_weight * F.l1_loss(recon, x)
            + self.kl_weight * posterior.kl().mean()
        )
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.vae.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@torch.no_grad()
def encode_latents(vae: AutoencoderKL, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Posterior means ``(N, 4, 8, 8)`` of images in [0, 1] ``(N, 1, 32, 32)``, unscaled."""
    vae.eval()
    return torch.cat(
        [
            vae.encode(to_model_range(images[i : i + batch_size])).latent_dist.mean
            for i in range(0, len(images), batch_size)
        ]
    )


@torch.no_grad()
def reconstruct(vae: AutoencoderKL, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Decode the posterior means: reconstructions in [0, 1] of images in [0, 1]."""
    latents = encode_latents(vae, images, batch_size)
    return torch.cat(
        [to_image_range(vae.decode(latents[i : i + batch_size]).sample) for i in range(0, len(latents), batch_size)]
    )
