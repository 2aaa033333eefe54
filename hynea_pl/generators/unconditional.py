"""Unconditional latent diffusion: a frozen ``UNet2DModel`` + ``VQModel`` + DDIM (e.g. ``CompVis/ldm-celebahq-256``).

:class:`UNet2DGenerator` (the family class, named after its ``UNet2DModel`` denoiser) wraps in-memory diffusers
components; :class:`UnconditionalLDM` (the loader, named after the model) is its YAML-friendly form configured by a
checkpoint location (a local folder, or a Hugging Face hub id read from the local cache and downloaded only when the
hub is reachable). Conditions are ignored: every origin comes from its initial
noise alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from diffusers import DDIMScheduler, UNet2DModel, VQModel
from jsonargparse.typing import ClosedUnitInterval, PositiveInt
from torch import Tensor, nn

from hynea_pl.generators.base import DiffusionGenerator
from hynea_pl.generators.hub import checkpoint_key, load_pretrained, require_subfolders

#: Subfolders of a checkpoint in the ``LDMPipeline`` layout (``CompVis/ldm-celebahq-256``).
COMPONENTS = ("unet", "vqvae", "scheduler")


class UNet2DGenerator(DiffusionGenerator):
    """Frozen unconditional LDM: initial noise (+ HyperNet, control) -> image in [0, 1]; no guidance.

    Residual injection. ``UNet2DModel.forward`` takes no residuals, and diffusers is not edited, so while a
    HyperNet is given the frozen UNet gets forward *pre*-hooks on its up blocks and a forward hook on its mid block,
    installed for one model call and removed in a ``finally``. The pre-hooks add the HyperNet's skip residuals to
    the skip tensors each up block receives (``res_hidden_states_tuple``), the mid hook adds the mid residual to the
    mid block's output: exactly where ``UNet2DConditionModel`` adds a ControlNet's residuals. Hooks on the down
    blocks could not do this for the first skip (``conv_in``'s output is both that skip and the input of the first
    down block, so changing it would also change the encoder path); a copy of ``UNet2DModel.forward`` would drift
    from diffusers. Re-entrancy: the hooks live only inside :meth:`model_output`, which runs inside the
    checkpointed call, so a checkpoint recomputation installs its own hooks with the same residuals; a HyperNet-free
    call (the origin) sees a hook-free UNet.

    Autoencoder convention (as ``LDMPipeline`` and the original LDM): latents are divided by the scaling factor
    and ``VQModel.decode`` quantises them (the straight-through estimator passes gradients). The scaling factor is
    the VQ model's ``scaling_factor`` only when its config sets one; otherwise 1.0. The CompVis VQ-f4 LDMs were
    trained on unscaled latents (``scale_factor`` 1.0), and diffusers' default of 0.18215 (a Stable Diffusion
    KL-VAE value) is not theirs: ``LDMPipeline`` dividing by it gives broken CelebA-HQ faces (diffusers issue
    #6725).

    Args:
        unet: the frozen ``UNet2DModel`` (epsilon prediction, as the scheduler is configured).
        vqvae: the frozen ``VQModel``.
        scheduler: default ``DDIMScheduler()``.
        num_inference_steps, eta: see :class:`DiffusionGenerator`.
        quantize: quantise latents in the decoder (``LDMPipeline`` does); ``False``: decode them as they are.
        scaling_factor: override the latent scaling factor (``None``: see above).
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`.
    """

    def __init__(
        self,
        unet: UNet2DModel,
        vqvae: VQModel,
        scheduler: Any | None = None,
        num_inference_steps: PositiveInt = 100,
        eta: ClosedUnitInterval = 0.0,
        quantize: bool = True,
        scaling_factor: float | None = None,
        **memory: Any,
    ) -> None:
        super().__init__(unet, vqvae, scheduler=scheduler, num_inference_steps=num_inference_steps,
                         guidance_scale=1.0, eta=eta, **memory)
        self.unet = unet
        self.quantize = quantize
        self.scaling_factor = float(scaling_factor) if scaling_factor is not None else vq_scaling_factor(vqvae)
        self._skip_slices = up_block_skip_slices(unet)
        self.requires_grad_(False)
        self.train(False)

    @property
    def denoiser(self) -> nn.Module:
        return self.unet

    def make_hypernet(self) -> nn.Module:
        """A fresh, trainable, zero-initialised :class:`UNet2DHyperNet` for this UNet."""
        from hynea_pl.hypernets.unet2d_hypernet import UNet2DHyperNet

        return UNet2DHyperNet(self.unet)

    def load_hypernet(self, directory: str | Path) -> nn.Module:
        """The :class:`UNet2DHyperNet` saved in ``directory``, rebuilt from this UNet."""
        from hynea_pl.hypernets.unet2d_hypernet import UNet2DHyperNet

        return UNet2DHyperNet.from_pretrained(directory, self.unet)

    # ------------------------------------------------------------------ conditions: none
    def encode_condition(self, condition: Any, batch: int) -> tuple[None, None]:
        """The generator is unconditional: any condition (a case's class, ``None``) is ignored; no guidance."""
        return None, None

    # ------------------------------------------------------------------ one model call
    def model_output(self, model_input: Tensor, t: Tensor, states: Any, control: Tensor | None,
                     hypernet: nn.Module | None) -> Tensor:
        """Frozen UNet on ``model_input (B, C, h, w)``; with a HyperNet its residuals are added to the UNet's skip
        connections and mid-block output. Returns the noise prediction ``(B, C, h, w)``."""
        if hypernet is None:
            return self.unet(model_input, t).sample
        skips, mid = hypernet(model_input, t, control)
        with self.residuals_added(skips, mid):
            return self.unet(model_input, t).sample

    @contextlib.contextmanager
    def residuals_added(self, skips: tuple[Tensor, ...], mid: Tensor | None) -> Iterator[None]:
        """Within the block, the frozen UNet adds ``skips`` (one per skip connection, in the order its forward
        collects them) to the skips its up blocks receive, and ``mid`` to its mid block's output."""
        expected = sum(end - start for start, end in self._skip_slices)
        if len(skips) != expected:
            raise ValueError(f"got {len(skips)} skip residuals for a UNet with {expected} skip connections")
        handles = []
        try:
            for block, (start, end) in zip(self.unet.up_blocks, self._skip_slices, strict=True):
                handles.append(block.register_forward_pre_hook(_add_to_skips(skips[start:end]), with_kwargs=True))
            if mid is not None:
                if self.unet.mid_block is None:
                    raise ValueError("a mid-block residual was given but the UNet has no mid block")
                handles.append(self.unet.mid_block.register_forward_hook(lambda _m, _a, out: out + mid))
            yield
        finally:
            for handle in handles:
                handle.remove()

    # ------------------------------------------------------------------ the autoencoder (LDMPipeline's convention)
    def decode(self, latents: Tensor, condition: Any = None) -> Tensor:
        """Latents ``(B, C, h, w)`` -> images ``(B, 3, H, W)`` in [0, 1]: divide by the scaling factor, quantise
        (unless ``quantize`` is off), decode."""
        z = (latents / self.scaling_factor).to(self.vae.dtype)
        force_not_quantize = not self.quantize
        images = self._call(lambda x: self.vae.decode(x, force_not_quantize=force_not_quantize).sample, z)
        return ((images.float() + 1) / 2).clamp(0, 1)

    @torch.no_grad()
    def encode(self, images: Tensor) -> Tensor:
        """Images ``(B, 3, H, W)`` in [0, 1] -> pre-quantisation latents times the scaling factor."""
        latents = self.vae.encode((images * 2 - 1).to(self.vae.device, self.vae.dtype)).latents
        return latents.float() * self.scaling_factor


def vq_scaling_factor(vqvae: VQModel) -> float:
    """The VQ model's ``scaling_factor`` when its config sets it explicitly, else 1.0 (see the class docstring)."""
    if "scaling_factor" in (vqvae.config.get("_use_default_values") or []):
        return 1.0
    return float(vqvae.config.scaling_factor)


def up_block_skip_slices(unet: UNet2DModel) -> list[tuple[int, int]]:
    """For each up block in call order, the ``[start, end)`` range of the skip connections it consumes (skips are
    numbered in the order the UNet's forward collects them; each up block pops as many as it has resnets)."""
    counts = [len(block.resnets) for block in unet.up_blocks]
    slices, end = [], sum(counts)
    for count in counts:
        slices.append((end - count, end))
        end -= count
    return slices


def _add_to_skips(residuals: tuple[Tensor, ...]):
    """A forward pre-hook adding ``residuals`` to an up block's ``res_hidden_states_tuple`` (positional or not)."""

    def hook(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "res_hidden_states_tuple" in kwargs:
            skips = kwargs["res_hidden_states_tuple"]
        else:
            skips = args[1]
        if len(skips) != len(residuals):
            raise RuntimeError(f"an up block received {len(skips)} skips, expected {len(residuals)}")
        added = tuple(s + r for s, r in zip(skips, residuals, strict=True))
        if "res_hidden_states_tuple" in kwargs:
            return args, {**kwargs, "res_hidden_states_tuple": added}
        return (args[0], added, *args[2:]), kwargs

    return hook


# ---------------------------------------------------------------------- loading (YAML-friendly form)
DTYPES = ("float32", "bfloat16", "float16")


@lru_cache(maxsize=2)
def _load_frozen(pretrained: str, dtype: str) -> tuple[UNet2DModel, VQModel, DDIMScheduler]:
    """Frozen components, loaded once per process and shared by every test case's fresh wrapper (a scheduler holds
    per-chain state: each wrapper builds its own from the cached one's config). A hub id is read from the local
    Hugging Face cache, and downloaded only when the hub is reachable (see
    :func:`~hynea_pl.generators.hub.load_pretrained`)."""
    require_subfolders(pretrained, COMPONENTS, "generator", f"expected {', '.join(c + '/' for c in COMPONENTS)} as "
                       "in the LDMPipeline layout of CompVis/ldm-celebahq-256")
    torch_dtype = getattr(torch, dtype)
    unet = load_pretrained(UNet2DModel, pretrained, subfolder="unet", torch_dtype=torch_dtype)
    vqvae = load_pretrained(VQModel, pretrained, subfolder="vqvae", torch_dtype=torch_dtype)
    scheduler = load_pretrained(DDIMScheduler, pretrained, subfolder="scheduler")
    for module in (unet, vqvae):
        module.requires_grad_(False).eval()
    return unet, vqvae, scheduler


class UnconditionalLDM(UNet2DGenerator):
    """The frozen unconditional LDM of the paper's CelebA task (``CompVis/ldm-celebahq-256``: ``UNet2DModel`` +
    ``VQModel`` + DDIM), configured by a checkpoint location.

    Args:
        pretrained: a local folder with ``unet/``, ``vqvae/``, ``scheduler/`` (``LDMPipeline``'s layout, as
            ``save_pretrained`` writes it), or a hub id (read from the local Hugging Face cache;
            downloaded only when the hub is reachable and ``HF_HUB_OFFLINE`` is unset).
        num_inference_steps: DDIM steps (paper: 100).
        eta: DDIM eta (paper: 0, deterministic).
        dtype: weights dtype (``float32``, ``bfloat16``, ``float16``).
        quantize: quantise latents before decoding, as ``LDMPipeline`` does.
        scaling_factor: latent scaling factor; ``null``: the VQ model's when its config sets one, else 1.0.
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`
            (``gradient_checkpointing``, ``grad_steps``, ``autocast_dtype``; ``channels_last`` converts the UNet
            and the VQ model).
    """

    def __init__(
        self,
        pretrained: str = "CompVis/ldm-celebahq-256",
        num_inference_steps: PositiveInt = 100,
        eta: ClosedUnitInterval = 0.0,
        dtype: str = "float32",
        quantize: bool = True,
        scaling_factor: float | None = None,
        **memory: Any,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        unet, vqvae, scheduler = _load_frozen(checkpoint_key(pretrained), dtype)
        super().__init__(
            unet, vqvae, scheduler=DDIMScheduler.from_config(scheduler.config),
            num_inference_steps=num_inference_steps, eta=eta, quantize=quantize,
            scaling_factor=scaling_factor, **memory,
        )
        self.pretrained = pretrained
