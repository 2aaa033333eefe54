"""The frozen diffusion generator every method steers: stored noise + condition (+ HyperNet, control) -> image.

:class:`DiffusionGenerator` extends the common :class:`~hynea_pl.generators.protocol.Generator` surface (seeded
initial noise, ``sample``, ``device``, frozen) and owns what all denoiser families share: the scheduler loop,
classifier-free guidance batching, gradient checkpointing of every model call, truncated back-propagation, bf16
autocast, ``channels_last`` and the autoencoder's decode/encode. A family (class-conditional UNet, text-conditional
UNet, unconditional UNet + VQ, DiT) only says how a condition becomes model inputs (:meth:`encode_condition`), how
one model call runs with the HyperNet's residuals (:meth:`model_output`) and which HyperNet fits it
(:meth:`make_hypernet` for a fresh one, :meth:`load_hypernet` for one saved with ``save_pretrained``).

The memory / speed levers are one :class:`MemoryOptions`, declared here once: every diffusion generator's constructor
takes its fields as keyword arguments (``**memory``), so YAML keeps them as flat keys under ``generator.init_args``.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
from diffusers import DDIMScheduler
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hynea_pl.generators.protocol import Generator

AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class MemoryOptions:
    """The memory / speed levers of a diffusion generator's differentiable chain.

    Every diffusion generator's constructor takes these fields as keyword arguments (in YAML: flat keys under
    ``generator.init_args``) and keeps them as attributes of the same names; :attr:`DiffusionGenerator.memory`
    reads them back as one object.

    Args:
        gradient_checkpointing: wrap every model call of the chain and the decoder in
            ``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` when gradients are on: activation memory
            stays flat in the number of steps, at the cost of one more forward per call. Off by default (the
            real-setup configs turn it on).
        grad_steps: truncated back-propagation: gradients flow only through the last ``grad_steps`` entries of
            ``scheduler.timesteps`` (the earlier ones run without autograd); ``None``: through every step. For
            schedulers with two model calls per step (Heun) an entry is one model call, not one step.
        autocast_dtype: ``"bfloat16"`` / ``"float16"``: run model calls under ``torch.autocast``; ``None``: off.
        channels_last: convert the denoiser and autoencoder to ``torch.channels_last`` memory format.
    """

    gradient_checkpointing: bool = False
    grad_steps: int | None = None
    autocast_dtype: str | None = None
    channels_last: bool = False

    def __post_init__(self) -> None:
        grad_steps = self.grad_steps
        if grad_steps is not None and (isinstance(grad_steps, bool) or grad_steps < 1):
            raise ValueError(f"grad_steps must be >= 1 (or None for every step), got {grad_steps}")
        if self.autocast_dtype is not None and self.autocast_dtype not in AUTOCAST_DTYPES:
            raise ValueError(f"autocast_dtype must be one of {sorted(AUTOCAST_DTYPES)} or null, "
                             f"got {self.autocast_dtype!r}")


class DiffusionGenerator(Generator):
    """Frozen latent diffusion model; the sampling chain is differentiable w.r.t. a HyperNet and its control.

    Args:
        denoiser: the noise-prediction network (a diffusers UNet or transformer); frozen.
        vae: the autoencoder (``AutoencoderKL`` or ``VQModel``); latents are divided by
            ``vae.config.scaling_factor`` (and shifted by ``shift_factor``) before decoding.
        scheduler: any diffusers scheduler with ``set_timesteps`` / ``scale_model_input`` / ``step``;
            default ``DDIMScheduler()``.
        num_inference_steps: sampling steps.
        guidance_scale: classifier-free guidance scale (off at ``<= 1`` or when the family has no null condition).
        eta: DDIM eta (passed to schedulers whose ``step`` takes it).
        **memory: the :class:`MemoryOptions` fields (``gradient_checkpointing``, ``grad_steps``,
            ``autocast_dtype``, ``channels_last``), kept as attributes of the same names.
    """

    def __init__(
        self,
        denoiser: nn.Module,
        vae: nn.Module,
        scheduler: Any | None = None,
        num_inference_steps: PositiveInt = 20,
        guidance_scale: NonNegativeFloat = 1.0,
        eta: ClosedUnitInterval = 0.0,
        **memory: Any,
    ) -> None:
        super().__init__()
        unknown = sorted(set(memory) - {f.name for f in fields(MemoryOptions)})
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword argument(s) {', '.join(unknown)} (its "
                            f"memory options: {', '.join(f.name for f in fields(MemoryOptions))})")
        options = MemoryOptions(**memory)  # ``**memory`` here is how jsonargparse finds the options' keys and types
        self.vae = vae
        self.scheduler = scheduler if scheduler is not None else DDIMScheduler()
        self.num_inference_steps = num_inference_steps
        self.guidance_scale = guidance_scale
        self.eta = eta
        for name, value in asdict(options).items():  # plain attributes: a benchmark or test may flip one
            setattr(self, name, value)
        if options.channels_last:
            denoiser.to(memory_format=torch.channels_last)
            vae.to(memory_format=torch.channels_last)
        self.requires_grad_(False)

    # ------------------------------------------------------------------ what a family defines
    @property
    def denoiser(self) -> nn.Module:
        """The noise-prediction network."""
        raise NotImplementedError(f"{type(self).__name__} must define the denoiser property")

    def encode_condition(self, condition: Any, batch: int) -> tuple[Any, Any | None]:
        """A condition -> ``(cond, uncond)`` model inputs for a batch; ``uncond`` is ``None`` when the family has
        no null condition (then guidance is off)."""
        raise NotImplementedError(f"{type(self).__name__} must implement encode_condition()")

    def model_output(self, model_input: Tensor, t: Tensor, states: Any, control: Tensor | None,
                     hypernet: nn.Module | None) -> Tensor:
        """One call of the frozen denoiser (HyperNet residuals added) on ``model_input (N, C, h, w)``, ``N = 2B``
        under guidance; returns the scheduler's model output ``(N, C, h, w)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement model_output()")

    def combine_states(self, cond: Any, uncond: Any) -> Any:
        """Model inputs of a guided call: unconditional half first (tensors are concatenated on dim 0)."""
        return torch.cat([uncond, cond])

    def guide(self, output: Tensor) -> Tensor:
        """Classifier-free guidance on a doubled output ``(2B, ...)`` -> ``(B, ...)``."""
        uncond, cond = output.chunk(2)
        return uncond + self.guidance_scale * (cond - uncond)

    def make_hypernet(self) -> nn.Module:
        """A fresh, trainable, zero-initialised HyperNet for this denoiser (it changes nothing yet)."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_hypernet()")

    def load_hypernet(self, directory: str | Path) -> nn.Module:
        """The counterpart of :meth:`make_hypernet`: the HyperNet saved (``hypernet.save_pretrained(directory)``)
        for this denoiser, rebuilt from it and loaded strictly by the fitting HyperNet class's ``from_pretrained``."""
        raise NotImplementedError(f"{type(self).__name__} must implement load_hypernet()")

    # ------------------------------------------------------------------ the common surface
    @property
    def memory(self) -> MemoryOptions:
        """The memory / speed levers now in force (the attributes of the same names)."""
        return MemoryOptions(**{f.name: getattr(self, f.name) for f in fields(MemoryOptions)})

    @property
    def device(self) -> torch.device:
        return next(self.denoiser.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.denoiser.parameters()).dtype

    @property
    def latent_shape(self) -> tuple[int, int, int]:
        """``(C, h, w)`` of the denoiser's input latents (from its config's ``in_channels`` / ``sample_size``)."""
        config = self.denoiser.config
        size = config.sample_size
        h, w = (size, size) if isinstance(size, int) else tuple(size)
        return (config.in_channels, h, w)

    # ------------------------------------------------------------------ the chain
    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=AUTOCAST_DTYPES[self.autocast_dtype])

    def _call(self, fn: Any, *args: Any) -> Any:
        """A model call: under autocast when configured, checkpointed when configured and gradients are on."""

        def run(*inputs: Any) -> Any:
            with self._autocast():
                return fn(*inputs)

        if self.gradient_checkpointing and torch.is_grad_enabled():
            return checkpoint(run, *args, use_reentrant=False)
        return run(*args)

    def _step_kwargs(self, generator: torch.Generator) -> dict[str, Any]:
        params = inspect.signature(self.scheduler.step).parameters  # the scheduler may be swapped
        kwargs: dict[str, Any] = {}
        if "eta" in params:
            kwargs["eta"] = self.eta
        if "generator" in params:
            kwargs["generator"] = generator
        return kwargs

    def denoise(
        self,
        noise: Tensor,
        condition: Any = None,
        hypernet: nn.Module | None = None,
        control: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Run the sampling chain: ``noise (B, C, h, w)`` -> latents ``(B, C, h, w)``.

        ``control (B, C', h', w')`` is handed to the HyperNet. ``generator`` feeds stochastic scheduler steps
        (eta > 0, ancestral samplers); by default a CPU generator seeded with 0 per call, so the chain is a
        deterministic function of ``noise``. With ``grad_steps = K`` only the last K steps record gradients.
        """
        batch = noise.shape[0]
        cond, uncond = self.encode_condition(condition, batch)
        guided = self.guidance_scale > 1 and uncond is not None
        states = self.combine_states(cond, uncond) if guided else cond
        step_kwargs = self._step_kwargs(generator or torch.Generator("cpu").manual_seed(0))

        self.scheduler.set_timesteps(self.num_inference_steps, device=self.device)
        timesteps = self.scheduler.timesteps
        first_with_grad = 0 if self.grad_steps is None else max(len(timesteps) - self.grad_steps, 0)
        latents = noise.to(self.device, self.dtype) * self.scheduler.init_noise_sigma

        def model_call(x: Tensor, tt: Tensor, c: Tensor | None) -> Tensor:
            out = self.model_output(x, tt, states, c, hypernet)
            return self.guide(out) if guided else out

        for index, t in enumerate(timesteps):
            grad = torch.is_grad_enabled() and index >= first_with_grad
            with torch.set_grad_enabled(grad):
                model_input = torch.cat([latents, latents]) if guided else latents
                model_input = self.scheduler.scale_model_input(model_input, t)
                output = self._call(model_call, model_input, t, control)
                latents = self.scheduler.step(output.to(latents.dtype), t, latents, **step_kwargs).prev_sample
        return latents

    def denoising_loss(self, latents: Tensor, condition: Any, t: Tensor, noise: Tensor) -> Tensor:
        """The frozen denoiser's training loss on ``latents (B, C, h, w)`` noised to timestep ``t`` with ``noise``
        (no HyperNet, no guidance): low where the latents are likely under the model for ``condition``. A prior
        that keeps an adapted sample on the generator's manifold; gradients reach ``latents``."""
        cond, _ = self.encode_condition(condition, latents.shape[0])
        noisy = self.scheduler.add_noise(latents, noise.to(latents), t)
        output = self.model_output(self.scheduler.scale_model_input(noisy, t), t, cond, None, None)
        kind = getattr(self.scheduler.config, "prediction_type", "epsilon")
        target = {"epsilon": noise, "sample": latents}.get(kind)
        if target is None:
            target = self.scheduler.get_velocity(latents, noise.to(latents), t)
        return (output.float() - target.float()).pow(2).mean()

    # ------------------------------------------------------------------ the autoencoder
    def decode(self, latents: Tensor, condition: Any = None) -> Tensor:
        """Scaled latents ``(B, C, h, w)`` -> images ``(B, C_img, H, W)`` in [0, 1] (``condition`` is for families
        whose decoding depends on it, e.g. a scene's layout; ignored here)."""
        config = self.vae.config
        z = latents / getattr(config, "scaling_factor", 1.0)
        if getattr(config, "shift_factor", None) is not None:
            z = z + config.shift_factor
        images = self._call(lambda x: self.vae.decode(x).sample, z.to(self.vae.dtype))
        return ((images.float() + 1) / 2).clamp(0, 1)

    @torch.no_grad()
    def encode(self, images: Tensor) -> Tensor:
        """Images ``(B, C_img, H, W)`` in [0, 1] -> scaled latents (the inverse convention of :meth:`decode`):
        the posterior mean of an ``AutoencoderKL``, the pre-quantisation latents of a ``VQModel``."""
        encoded = self.vae.encode((images * 2 - 1).to(self.vae.device, self.vae.dtype))
        latents = encoded.latent_dist.mean if hasattr(encoded, "latent_dist") else encoded.latents
        latents = latents.float()
        config = self.vae.config
        if getattr(config, "shift_factor", None) is not None:
            latents = latents - config.shift_factor
        return latents * getattr(config, "scaling_factor", 1.0)

    # ------------------------------------------------------------------ entry points
    @torch.no_grad()
    def sample(self, noise: Tensor, condition: Any = None, hypernet: nn.Module | None = None,
               control: Tensor | None = None) -> Tensor:
        """Images without gradients (origins, population searches, evaluating an adapted HyperNet)."""
        return self.decode(self.denoise(noise, condition, hypernet, control), condition)

    def forward(self, noise: Tensor, condition: Any = None, hypernet: nn.Module | None = None,
                control: Tensor | None = None) -> Tensor:
        """Differentiable chain + decode: images ``(B, C_img, H, W)`` in [0, 1]; gradients reach only the
        HyperNet and ``control``."""
        return self.decode(self.denoise(noise, condition, hypernet, control), condition)
