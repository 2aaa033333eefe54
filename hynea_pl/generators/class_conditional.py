"""A class-conditional latent diffusion generator configured by a path (YAML-friendly)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch
from jsonargparse.typing import ClosedUnitInterval, NonNegativeFloat, PositiveInt

from hynea_pl.generators.ldm import LatentDiffusionGenerator
from hynea_pl.paths import resolve_path


@lru_cache(maxsize=4)
def _load_frozen(path: str, dtype: str) -> LatentDiffusionGenerator:
    """Components are loaded once per process and shared: every test case gets a fresh wrapper around the same
    frozen weights instead of reading them from disk again."""
    return LatentDiffusionGenerator.from_pretrained(path, torch_dtype=getattr(torch, dtype))


class ClassConditionalLDM(LatentDiffusionGenerator):
    """A frozen class-conditional LDM (``UNet2DConditionModel`` + ``AutoencoderKL`` + ``ClassEmbedding`` + DDIM).

    Args:
        pretrained: a folder with ``unet/``, ``vae/``, ``scheduler/``, ``class_embedding/`` (as written by each
            component's ``save_pretrained``), or ``zoo://<profile>/ldm`` for the embedded MNIST zoo.
        num_inference_steps: DDIM steps of the sampling chain.
        guidance_scale: classifier-free guidance scale (off at <= 1).
        eta: DDIM eta (0: deterministic).
        dtype: weights dtype (``float32``, ``bfloat16``, ``float16``).
        **memory: the memory / speed levers, :class:`~hynea_pl.generators.base.MemoryOptions`
            (``gradient_checkpointing``, ``grad_steps``, ``autocast_dtype``, ``channels_last``; on CPU at MNIST
            size checkpointing costs time and saves little memory).
    """

    def __init__(
        self,
        pretrained: str = "zoo://full/ldm",
        num_inference_steps: PositiveInt = 20,
        guidance_scale: NonNegativeFloat = 3.0,
        eta: ClosedUnitInterval = 0.0,
        dtype: str = "float32",
        **memory: Any,
    ) -> None:
        frozen = _load_frozen(str(resolve_path(pretrained)), dtype)
        super().__init__(
            frozen.unet, frozen.vae, scheduler=type(frozen.scheduler).from_config(frozen.scheduler.config),
            condition_encoder=frozen.condition_encoder, num_inference_steps=num_inference_steps,
            guidance_scale=guidance_scale, eta=eta, **memory,
        )
