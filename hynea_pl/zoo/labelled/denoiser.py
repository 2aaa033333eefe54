"""The zoo's latent denoisers: the MNIST LDM's class-conditional diffusers ``UNet2DConditionModel`` that reads a
learned class token through ``encoder_hidden_states`` (10 digits + a null class for classifier-free guidance), or
an unconditional ``UNet2DModel``."""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler, UNet2DConditionModel, UNet2DModel
from lightning.pytorch.callbacks import WeightAveraging
from torch.optim.swa_utils import get_ema_multi_avg_fn

from hynea_pl.generators.conditioning import ClassEmbedding
from hynea_pl.schedules import safe_pct_start


class DenoiserTraining(L.LightningModule):
    """Epsilon-prediction diffusion training on pre-encoded, scaled latents (MNIST ``(B, 4, 8, 8)``); the loss is
    weighted with min-SNR-``snr_gamma``.

    Class-conditional (batches ``(latents, labels)``): labels are replaced by the null class with probability
    ``label_dropout`` (classifier-free guidance). Unconditional (``class_embedding=None``, a ``UNet2DModel``):
    batches ``(latents,)``.
    """

    def __init__(
        self,
        unet: UNet2DConditionModel | UNet2DModel,
        class_embedding: ClassEmbedding | None,
        noise_scheduler: DDPMScheduler,
        lr: float,
        max_steps: int,
        label_dropout: float = 0.1,
        snr_gamma: float = 5.0,
    ) -> None:
        super().__init__()
        self.unet = unet
        self.class_embedding = class_embedding
        self.noise_scheduler = noise_scheduler
        self.lr = lr
        self.max_steps = max_steps
        self.label_dropout = label_dropout
        self.snr_gamma = snr_gamma
        alphas_cumprod = noise_scheduler.alphas_cumprod
        self.register_buffer("snr", alphas_cumprod / (1 - alphas_cumprod), persistent=False)

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        latents = batch[0]
        if self.class_embedding is not None:
            labels = batch[1]
            drop = torch.rand(labels.shape, device=labels.device) < self.label_dropout
            labels = torch.where(drop, torch.full_like(labels, self.class_embedding.null_class), labels)
        noise = torch.randn_like(latents)
        timesteps = torch.randint(
            0, self.noise_scheduler.config.num_train_timesteps, (len(latents),), device=latents.device
        )
        noisy = self.noise_scheduler.add_noise(latents, noise, timesteps)
        if self.class_embedding is None:
            eps = self.unet(noisy, timesteps).sample
        else:
            eps = self.unet(noisy, timesteps, encoder_hidden_states=self.class_embedding(labels)).sample
        snr = self.snr[timesteps]
        weight = snr.clamp(max=self.snr_gamma) / snr
        loss = (weight * F.mse_loss(eps, noise, reduction="none").mean(dim=(1, 2, 3))).mean()
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        params = list(self.unet.parameters())
        if self.class_embedding is not None:
            params += list(self.class_embedding.parameters())
        optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=1e-2)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=self.lr, total_steps=self.max_steps, pct_start=safe_pct_start(0.1, self.max_steps)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class EMA(WeightAveraging):
    """Exponential moving average of the weights (``decay`` per step); the fit ends with the averaged weights."""

    def __init__(self, decay: float = 0.995) -> None:
        super().__init__(multi_avg_fn=get_ema_multi_avg_fn(decay))
