"""Inversion: a real image -> the initial noise from which the frozen generator's sampling chain reproduces it.

A case that starts from a user's own image needs the noise every method then starts from (HyNeA adapts the chain
from it, GIFTbench perturbs it). :class:`DDIMInversion` maps the image to the autoencoder's latent
(:meth:`DiffusionGenerator.encode`) and runs the deterministic DDIM chain backwards, conditioned on the image's
label and with the generator's own classifier-free guidance:

- **plain** DDIM inversion (``fixed_point_iterations = 0``) approximates each step's noise prediction by the one at
  the less noisy latent: cheap, but the error grows with the guidance scale;
- **fixed-point** steps (Pan et al. 2023, "Effective real image editing with accelerated iterative diffusion
  inversion"; ReNoise, Garibi et al. 2024): each step is solved for the noisier latent that the sampler maps back
  onto the known one, by iterating ``x_t <- step^-1(x_prev, eps(x_t))``;
- **refinement** (``refine_steps > 0``): Adam on the noise itself, through the differentiable chain, toward the
  image's latent, for what the two above leave.

Only deterministic DDIM sampling (``DDIMScheduler``, ``eta = 0``) can be inverted this way; other schedulers are
refused with one line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from diffusers import DDIMScheduler
from torch import Tensor

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.protocol import conditions_beyond_class


@dataclass(frozen=True)
class InversionResult:
    """What an inversion gives back for a batch of ``B`` images.

    Attributes:
        noise: ``(B, C, h, w)`` initial noise; ``generator.sample(noise, condition)`` is the reconstruction.
        reconstruction: ``(B, C_img, H, W)`` in [0, 1], the image the generator makes from ``noise``.
        latent_error: ``(B,)`` RMS difference between the reconstruction's sampled latent and the image's latent,
            relative to the latent's RMS (0: exact).
        seconds: wall time of the whole inversion, per image.
    """

    noise: Tensor
    reconstruction: Tensor
    latent_error: Tensor
    seconds: float


@dataclass(frozen=True)
class DDIMInversion:
    """Deterministic DDIM inversion with optional fixed-point steps and refinement; see the module docstring.

    Args:
        fixed_point_iterations: extra noise predictions per step that solve the step exactly (0: plain inversion).
        refine_steps: Adam steps on the noise through the sampling chain (0: none).
        refine_lr: their learning rate.
    """

    fixed_point_iterations: int = 5
    refine_steps: int = 0
    refine_lr: float = 0.05

    def __post_init__(self) -> None:
        for name in ("fixed_point_iterations", "refine_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"inversion.{name} must be an integer >= 0, got {value!r}")
        if not self.refine_lr > 0:
            raise ValueError(f"inversion.refine_lr must be > 0, got {self.refine_lr!r}")

    def __call__(self, generator: DiffusionGenerator, images: Tensor, condition: Any = None) -> InversionResult:
        """Invert ``images (B, C_img, H, W)`` in [0, 1] under ``condition`` (a class index or ``(B,)`` labels)."""
        check_invertible(generator)
        start = time.perf_counter()
        with torch.no_grad():
            target = generator.encode(images.to(generator.device))
            noise = self._invert_latents(generator, target, condition)
        if self.refine_steps:
            noise = self._refine(generator, noise, target, condition)
        with torch.no_grad():
            latents = generator.denoise(noise, condition)
            reconstruction = generator.decode(latents)
        rms = target.flatten(1).pow(2).mean(1).sqrt().clamp_min(1e-8)
        error = (latents - target).flatten(1).pow(2).mean(1).sqrt() / rms
        seconds = (time.perf_counter() - start) / max(len(images), 1)
        return InversionResult(noise.detach(), reconstruction.detach(), error.detach(), seconds)

    # ------------------------------------------------------------------ the chain backwards
    def _invert_latents(self, generator: DiffusionGenerator, latents: Tensor, condition: Any) -> Tensor:
        """Clean latents ``(B, C, h, w)`` -> the initial noise of the chain that ends on them."""
        scheduler: DDIMScheduler = generator.scheduler
        scheduler.set_timesteps(generator.num_inference_steps, device=generator.device)
        predict = noise_predictor(generator, condition, latents.shape[0])
        stride = scheduler.config.num_train_timesteps // scheduler.num_inference_steps
        alphas = scheduler.alphas_cumprod.to(generator.device, torch.float32)
        x = latents.float()
        for t in reversed(scheduler.timesteps):  # the least noisy step first
            prev = int(t) - stride
            a_t = alphas[int(t)]
            a_prev = alphas[prev] if prev >= 0 else scheduler.final_alpha_cumprod.to(a_t)
            known = x  # the latent the sampler's step from t must land on

            def up(eps: Tensor, known: Tensor = known, a_t: Tensor = a_t, a_prev: Tensor = a_prev) -> Tensor:
                x0 = (known - (1 - a_prev).sqrt() * eps) / a_prev.sqrt()
                return a_t.sqrt() * x0 + (1 - a_t).sqrt() * eps

            x = up(predict(known, t))
            for _ in range(self.fixed_point_iterations):
                x = up(predict(x, t))
        return x / scheduler.init_noise_sigma

    def _refine(self, generator: DiffusionGenerator, noise: Tensor, target: Tensor, condition: Any) -> Tensor:
        """Adam on ``noise`` so that the chain's latents meet ``target`` (each image its own loss)."""
        noise = noise.clone().requires_grad_(True)
        optimizer = torch.optim.Adam([noise], lr=self.refine_lr)
        for _ in range(self.refine_steps):
            optimizer.zero_grad()
            with torch.enable_grad():
                loss = (generator.denoise(noise, condition) - target).pow(2).flatten(1).mean(1).sum()
                loss.backward()
            optimizer.step()
        return noise.detach()


def check_invertible(generator: Any) -> None:
    """Refuse, in one line, a generator whose sampling chain :class:`DDIMInversion` cannot run backwards."""
    if not isinstance(generator, DiffusionGenerator):
        raise TypeError(f"inversion origins need a diffusion generator, got {type(generator).__name__}")
    if conditions_beyond_class(generator):
        raise TypeError(f"inversion origins need a generator conditioned on the image's class; "
                        f"{type(generator).__name__} conditions its cases on more (e.g. a scene layout)")
    if not isinstance(generator.scheduler, DDIMScheduler):
        raise TypeError(f"inversion origins need a DDIMScheduler (deterministic DDIM sampling), got "
                        f"{type(generator.scheduler).__name__}")
    if generator.eta != 0:
        raise ValueError(f"inversion origins need deterministic sampling (generator eta 0), got eta {generator.eta}")
    kind = generator.scheduler.config.prediction_type
    if kind not in ("epsilon", "v_prediction"):
        raise ValueError(f"inversion origins need an epsilon or v-prediction denoiser, got {kind!r}")


def noise_predictor(generator: DiffusionGenerator, condition: Any, batch: int) -> Any:
    """``(x (B, C, h, w), t) -> eps (B, C, h, w)``: the frozen denoiser's noise prediction under ``condition``, with
    the generator's classifier-free guidance (as its sampling chain uses it)."""
    cond, uncond = generator.encode_condition(condition, batch)
    guided = generator.guidance_scale > 1 and uncond is not None
    states = generator.combine_states(cond, uncond) if guided else cond
    scheduler = generator.scheduler
    kind = scheduler.config.prediction_type

    def predict(x: Tensor, t: Tensor) -> Tensor:
        model_input = scheduler.scale_model_input(torch.cat([x, x]) if guided else x, t)
        output = generator.model_output(model_input.to(generator.dtype), t, states, None, None)
        output = (generator.guide(output) if guided else output).float()
        if kind == "epsilon":
            return output
        a_t = scheduler.alphas_cumprod[int(t)].to(x)
        return a_t.sqrt() * output + (1 - a_t).sqrt() * x  # v -> eps

    return predict


__all__ = ["DDIMInversion", "InversionResult", "check_invertible", "noise_predictor"]
