"""A frozen UNet latent diffusion model conditioned through cross-attention (class tokens or hidden states).

``LatentDiffusionGenerator`` wraps diffusers components (``UNet2DConditionModel``, ``AutoencoderKL``, a
scheduler and a condition encoder). All of them stay frozen and in eval mode; gradients of the generated image
flow only into the HyperNet and the control passed to :meth:`LatentDiffusionGenerator.forward`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch
from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor, nn

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.conditioning import ClassEmbedding

Condition = int | Tensor | tuple[Tensor, Tensor] | None


class HyperNet(Protocol):
    """What the chain needs from a UNet HyperNet: residuals for the frozen UNet's skips and mid block."""

    def __call__(
        self, sample: Tensor, timestep: Tensor, encoder_hidden_states: Tensor, control: Tensor | None
    ) -> tuple[tuple[Tensor, ...], Tensor]: ...


class LatentDiffusionGenerator(DiffusionGenerator):
    """Frozen cross-attention LDM: initial noise + condition (+ HyperNet, control) -> image in [0, 1].

    Args:
        unet: the denoiser (epsilon / v / sample prediction, whatever the scheduler is configured for).
        vae: the autoencoder.
        scheduler: any diffusers scheduler; default ``DDIMScheduler()``.
        condition_encoder: maps a condition to ``encoder_hidden_states``; a :class:`ClassEmbedding` for class
            conditions. ``None``: conditions are given as ready-made hidden states (see :meth:`encode_condition`).
        num_inference_steps, guidance_scale, eta: see :class:`DiffusionGenerator`; guidance is off when the
            condition is ``None``.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`.
    """

    def __init__(
        self,
        unet: UNet2DConditionModel,
        vae: AutoencoderKL,
        scheduler: Any | None = None,
        condition_encoder: nn.Module | None = None,
        num_inference_steps: PositiveInt = 20,
        guidance_scale: NonNegativeFloat = 3.0,
        eta: ClosedUnitInterval = 0.0,
        **memory: Any,
    ) -> None:
        super().__init__(unet, vae, scheduler=scheduler, num_inference_steps=num_inference_steps,
                         guidance_scale=guidance_scale, eta=eta, **memory)
        self.unet = unet
        self.condition_encoder = condition_encoder
        self.requires_grad_(False)
        self.train(False)

    @property
    def denoiser(self) -> nn.Module:
        return self.unet

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        scheduler_cls: type = DDIMScheduler,
        torch_dtype: torch.dtype | None = None,
        **settings: Any,
    ) -> LatentDiffusionGenerator:
        """Load ``unet/``, ``vae/``, ``scheduler/`` and ``class_embedding/`` from a local folder.

        The folder layout is what each component's ``save_pretrained(path / subfolder)`` writes.
        ``settings`` are the constructor's sampling settings (``num_inference_steps``, ``guidance_scale``, ...).
        """
        root = Path(path)
        for sub in ("unet", "vae", "scheduler", "class_embedding"):
            if not (root / sub).is_dir():
                raise FileNotFoundError(f"LatentDiffusionGenerator.from_pretrained: missing folder '{root / sub}'")
        kwargs = {} if torch_dtype is None else {"torch_dtype": torch_dtype}
        unet = UNet2DConditionModel.from_pretrained(root, subfolder="unet", **kwargs)
        vae = AutoencoderKL.from_pretrained(root, subfolder="vae", **kwargs)
        scheduler = scheduler_cls.from_pretrained(root, subfolder="scheduler")
        encoder = ClassEmbedding.from_pretrained(root, subfolder="class_embedding", **kwargs)
        return cls(unet, vae, scheduler=scheduler, condition_encoder=encoder, **settings)

    def make_hypernet(self) -> nn.Module:
        """A fresh, trainable HyperNet for this generator's UNet; zero-initialised, so it changes nothing yet."""
        from hynea_pl.hypernets import UNetHyperNet

        return UNetHyperNet(self.unet)

    def load_hypernet(self, directory: str | Path) -> nn.Module:
        """The :class:`~hynea_pl.hypernets.UNetHyperNet` saved in ``directory``, rebuilt from this UNet."""
        from hynea_pl.hypernets import UNetHyperNet

        return UNetHyperNet.from_pretrained(directory, self.unet)

    # ------------------------------------------------------------------ conditions
    def encode_condition(self, condition: Condition, batch: int) -> tuple[Tensor, Tensor | None]:
        """Condition -> ``(cond_states, uncond_states)``, each ``(batch, S, D)``.

        With a condition encoder: ``condition`` is a class index (``int``), a ``LongTensor`` ``(B,)`` or ``(1,)``,
        or ``None`` (unconditional: the null class, no guidance). Without one: ``condition`` is
        ``(cond_states, uncond_states)`` or ``cond_states`` alone (then guidance must be off).
        """
        if self.condition_encoder is None:
            if isinstance(condition, tuple):
                cond, uncond = condition
            elif isinstance(condition, Tensor) and condition.is_floating_point():
                if self.guidance_scale > 1:
                    raise ValueError("guidance needs (cond_states, uncond_states) when there is no condition encoder")
                cond = uncond = condition
            else:
                raise ValueError("without a condition encoder, pass encoder hidden states (B, S, D) as the condition")
            return self.expand_batch(cond.to(self.device, self.dtype), batch), self.expand_batch(
                uncond.to(self.device, self.dtype), batch
            )

        null = getattr(self.condition_encoder, "null_class", None)
        if null is None:
            raise ValueError("the condition encoder has no null_class for unconditional / guided sampling")
        if condition is None:
            labels = torch.full((batch,), null, dtype=torch.long, device=self.device)
            return self.condition_encoder(labels).to(self.dtype), None
        if isinstance(condition, int):
            labels = torch.full((batch,), condition, dtype=torch.long, device=self.device)
        else:
            labels = self.expand_batch(torch.as_tensor(condition, device=self.device).long().reshape(-1), batch)
        uncond_labels = torch.full_like(labels, null)
        cond = self.condition_encoder(labels).to(self.dtype)
        uncond = self.condition_encoder(uncond_labels).to(self.dtype)
        return cond, uncond

    # ------------------------------------------------------------------ one model call
    def model_output(self, model_input: Tensor, t: Tensor, states: Tensor, control: Tensor | None,
                     hypernet: HyperNet | None) -> Tensor:
        """Frozen UNet on ``model_input (N, C, h, w)`` with the HyperNet's residuals on its skips and mid block."""
        down, mid = (None, None)
        if hypernet is not None:
            down, mid = hypernet(model_input, t, states, control)
        return self.unet(
            model_input,
            t,
            encoder_hidden_states=states,
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
        ).sample
