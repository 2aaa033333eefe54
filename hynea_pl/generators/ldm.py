"""A frozen latent diffusion model whose sampling chain is differentiable with respect to a HyperNet.

``LatentDiffusionGenerator`` wraps diffusers components (``UNet2DConditionModel``, ``AutoencoderKL``, a
scheduler and a condition encoder). All of them stay frozen and in eval mode; gradients of the generated image
flow only into the HyperNet and the control passed to :meth:`LatentDiffusionGenerator.forward`.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Protocol

import torch
from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hynea_pl.generators.conditioning import ClassEmbedding

Condition = int | Tensor | tuple[Tensor, Tensor] | None


class HyperNet(Protocol):
    """What the chain needs from a HyperNet: residuals for the frozen UNet's skips and mid block."""

    def __call__(
        self, sample: Tensor, timestep: Tensor, encoder_hidden_states: Tensor, control: Tensor | None
    ) -> tuple[tuple[Tensor, ...], Tensor]: ...


class LatentDiffusionGenerator(nn.Module):
    """Frozen LDM: initial noise + condition (+ HyperNet, control) -> image in [0, 1].

    Args:
        unet: the denoiser (epsilon / v / sample prediction, whatever the scheduler is configured for).
        vae: the autoencoder; latents are divided by ``vae.config.scaling_factor`` before decoding.
        scheduler: any diffusers scheduler with ``set_timesteps`` / ``scale_model_input`` / ``step``.
            Defaults to ``DDIMScheduler()``.
        condition_encoder: maps a condition to ``encoder_hidden_states``; a :class:`ClassEmbedding` for class
            conditions. ``None``: conditions are given as ready-made hidden states (see :meth:`encode_condition`).
        num_inference_steps: sampling steps.
        guidance_scale: classifier-free guidance scale; guidance is off when ``<= 1`` or the condition is ``None``.
        eta: DDIM eta (only passed to schedulers whose ``step`` takes it).
        checkpoint_steps: wrap every model call of the chain (and the decoder) in
            ``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` when gradients are enabled.
    """

    def __init__(
        self,
        unet: UNet2DConditionModel,
        vae: AutoencoderKL,
        scheduler: Any | None = None,
        condition_encoder: nn.Module | None = None,
        num_inference_steps: int = 20,
        guidance_scale: float = 3.0,
        eta: float = 0.0,
        checkpoint_steps: bool = True,
    ) -> None:
        super().__init__()
        self.unet = unet
        self.vae = vae
        self.condition_encoder = condition_encoder
        self.scheduler = scheduler if scheduler is not None else DDIMScheduler()
        self.num_inference_steps = num_inference_steps
        self.guidance_scale = guidance_scale
        self.eta = eta
        self.checkpoint_steps = checkpoint_steps
        self.requires_grad_(False)
        self.train(False)

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

    def train(self, mode: bool = True) -> LatentDiffusionGenerator:
        """The generator is frozen: it stays in eval mode whatever the caller (e.g. Lightning) asks for."""
        return super().train(False)

    # ------------------------------------------------------------------ shapes and noise
    @property
    def device(self) -> torch.device:
        return next(self.unet.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.unet.parameters()).dtype

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        """``(C, h, w)`` of the UNet's input latents."""
        size = self.unet.config.sample_size
        h, w = (size, size) if isinstance(size, int) else tuple(size)
        return (self.unet.config.in_channels, h, w)

    def initial_noise(self, seed: int) -> Tensor:
        """``(1, C, h, w)`` float32 standard normal noise, drawn on CPU (identical on every device)."""
        gen = torch.Generator("cpu").manual_seed(seed)
        return torch.randn((1, *self.latent_shape), generator=gen, dtype=torch.float32).to(self.device)

    # ------------------------------------------------------------------ conditions
    def encode_condition(self, condition: Condition, batch: int) -> tuple[Tensor, Tensor]:
        """Condition -> ``(cond_states, uncond_states)``, each ``(batch, S, D)``.

        With a condition encoder: ``condition`` is a class index (``int``), a ``LongTensor`` ``(B,)`` or ``(1,)``,
        or ``None`` (unconditional: the null class for both). Without one: ``condition`` is
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
            return self._expand(cond.to(self.device, self.dtype), batch), self._expand(
                uncond.to(self.device, self.dtype), batch
            )

        null = getattr(self.condition_encoder, "null_class", None)
        if null is None:
            raise ValueError("the condition encoder has no null_class for unconditional / guided sampling")
        if condition is None:
            labels = torch.full((batch,), null, dtype=torch.long, device=self.device)
        elif isinstance(condition, int):
            labels = torch.full((batch,), condition, dtype=torch.long, device=self.device)
        else:
            labels = self._expand(torch.as_tensor(condition, device=self.device).long().reshape(-1), batch)
        uncond_labels = torch.full_like(labels, null)
        cond = self.condition_encoder(labels).to(self.dtype)
        uncond = self.condition_encoder(uncond_labels).to(self.dtype)
        return cond, uncond

    @staticmethod
    def _expand(x: Tensor, batch: int) -> Tensor:
        if x.shape[0] == batch:
            return x
        if x.shape[0] == 1:
            return x.expand(batch, *x.shape[1:])
        raise ValueError(f"condition batch {x.shape[0]} does not match noise batch {batch}")

    # ------------------------------------------------------------------ the chain
    def _use_checkpoint(self) -> bool:
        return self.checkpoint_steps and torch.is_grad_enabled()

    def _call(self, fn: Any, *args: Any) -> Any:
        if self._use_checkpoint():
            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)

    def _model_eps(
        self,
        model_input: Tensor,
        t: Tensor,
        states: Tensor,
        control: Tensor | None,
        hypernet: HyperNet | None,
        guided: bool,
    ) -> Tensor:
        """One (guided) model call: HyperNet residuals, frozen UNet, CFG. ``model_input`` is already doubled."""
        down, mid = (None, None)
        if hypernet is not None:
            down, mid = hypernet(model_input, t, states, control)
        out = self.unet(
            model_input,
            t,
            encoder_hidden_states=states,
            down_block_additional_residuals=down,
            mid_block_additional_residual=mid,
        ).sample
        if guided:
            uncond, cond = out.chunk(2)
            out = uncond + self.guidance_scale * (cond - uncond)
        return out

    def denoise(
        self,
        noise: Tensor,
        condition: Condition = None,
        hypernet: HyperNet | None = None,
        control: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Run the sampling chain: ``noise (B, C, h, w)`` -> latents ``(B, C, h, w)``.

        ``control (B, C, h, w)`` is handed to the HyperNet. ``generator`` feeds stochastic scheduler steps
        (eta > 0, ancestral samplers); by default a CPU generator seeded with 0 per call, so the chain is a
        deterministic function of ``noise``.
        """
        batch = noise.shape[0]
        cond, uncond = self.encode_condition(condition, batch)
        guided = self.guidance_scale > 1 and condition is not None
        states = torch.cat([uncond, cond]) if guided else cond
        if generator is None:
            generator = torch.Generator("cpu").manual_seed(0)
        step_params = inspect.signature(self.scheduler.step).parameters  # the scheduler may be swapped
        step_kwargs: dict[str, Any] = {}
        if "eta" in step_params:
            step_kwargs["eta"] = self.eta
        if "generator" in step_params:
            step_kwargs["generator"] = generator

        self.scheduler.set_timesteps(self.num_inference_steps, device=self.device)
        latents = noise.to(self.device, self.dtype) * self.scheduler.init_noise_sigma
        for t in self.scheduler.timesteps:
            model_input = torch.cat([latents, latents]) if guided else latents
            model_input = self.scheduler.scale_model_input(model_input, t)
            eps = self._call(
                lambda x, tt, s, c: self._model_eps(x, tt, s, c, hypernet, guided), model_input, t, states, control
            )
            latents = self.scheduler.step(eps, t, latents, **step_kwargs).prev_sample
        return latents

    def decode(self, latents: Tensor) -> Tensor:
        """Latents ``(B, C, h, w)`` -> images ``(B, C_img, H, W)`` in [0, 1]."""
        config = self.vae.config
        z = latents / config.scaling_factor
        if getattr(config, "shift_factor", None) is not None:
            z = z + config.shift_factor
        images = self._call(lambda x: self.vae.decode(x).sample, z.to(self.vae.dtype))
        return ((images.float() + 1) / 2).clamp(0, 1)

    @torch.no_grad()
    def sample(
        self,
        noise: Tensor,
        condition: Condition = None,
        hypernet: HyperNet | None = None,
        control: Tensor | None = None,
    ) -> Tensor:
        """Images without gradients (origin generation, or evaluating an adapted HyperNet)."""
        return self.decode(self.denoise(noise, condition, hypernet, control))

    def forward(
        self,
        noise: Tensor,
        condition: Condition = None,
        hypernet: HyperNet | None = None,
        control: Tensor | None = None,
    ) -> Tensor:
        """Differentiable chain + decode: images ``(B, C_img, H, W)`` in [0, 1]; gradients reach only the
        HyperNet and ``control``."""
        return self.decode(self.denoise(noise, condition, hypernet, control))
