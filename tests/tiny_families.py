"""Every generator class on tiny random components, behind one signature (no downloads).

``FAMILIES`` are the family classes (in-memory components), ``LOADERS`` their YAML-facing subclasses (built from a
checkpoint folder written under the test's ``tmp_path``). ``build(folder, **settings)`` makes a 3-step generator;
``condition`` is the case condition it is sampled with. Shapes: see ``tiny_components`` (class-conditional LDM),
``tiny_sd`` (text), ``tiny_unconditional`` (UNet2D + VQ) and ``tiny_dit`` (DiT).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiny_components as ldm
import tiny_dit as dit
import tiny_sd as sd
import tiny_unconditional as unconditional
import torch
from torch import nn

from hynea_pl.generators import (
    ClassConditionalLDM,
    DiffusionGenerator,
    DiTGenerator,
    StableDiffusionGenerator,
    TextConditionalGenerator,
    UNet2DGenerator,
    UnconditionalLDM,
)
from hynea_pl.hypernets import TransformerHyperNet, UNet2DHyperNet, UNetHyperNet

STEPS = 3


@dataclass(frozen=True)
class Family:
    """One generator class: ``build(folder, **settings) -> generator`` and the condition to sample it with."""

    name: str
    build: Callable[..., DiffusionGenerator]
    condition: Any

    def __repr__(self) -> str:
        return self.name


def _settings(settings: dict, **defaults: Any) -> dict:
    return {"num_inference_steps": STEPS, **defaults, **settings}


def _text(folder: Path, **settings: Any) -> TextConditionalGenerator:
    tokenizer = sd.tiny_tokenizer(folder / "tokenizer")
    return TextConditionalGenerator(
        sd.tiny_unet(), sd.tiny_vae(), sd.tiny_text_encoder(len(tokenizer)), tokenizer, sd.tiny_scheduler(),
        **_settings(settings, prompt=sd.PROMPT, negative_prompt=sd.NEGATIVE_PROMPT, guidance_scale=3.0),
    )


FAMILIES = [
    Family("LatentDiffusionGenerator", lambda folder, **s: ldm.tiny_generator(**_settings(s)), 3),
    Family("TextConditionalGenerator", _text, None),
    Family("UNet2DGenerator", lambda folder, **s: UNet2DGenerator(
        unconditional.tiny_unet2d(), unconditional.tiny_vqvae(), unconditional.tiny_ddim(), **_settings(s)), None),
    Family("DiTGenerator.from_components", lambda folder, **s: DiTGenerator.from_components(
        dit.tiny_dit(), dit.tiny_rgb_vae(), dit.dit_scheduler(), **_settings(s, hypernet_blocks=2)), 207),
]

LOADERS = [
    Family("ClassConditionalLDM", lambda folder, **s: ClassConditionalLDM(
        str(ldm.save_tiny_ldm(folder / "ldm")), **_settings(s)), 3),
    Family("StableDiffusionGenerator", lambda folder, **s: StableDiffusionGenerator(
        str(sd.save_stable_diffusion(folder / "sd", folder / "tokenizer")),
        **_settings(s, prompt=sd.PROMPT, negative_prompt=sd.NEGATIVE_PROMPT, guidance_scale=3.0)), None),
    Family("UnconditionalLDM", lambda folder, **s: UnconditionalLDM(
        str(unconditional.save_tiny_checkpoint(folder / "ldm")), **_settings(s)), None),
    Family("DiTGenerator", lambda folder, **s: DiTGenerator(
        str(dit.save_dit_folder(folder / "dit")), **_settings(s, hypernet_blocks=2)), 207),
]


def control_zero_layer(hypernet: nn.Module) -> nn.Module:
    """The zero-initialised layer of a HyperNet's control path (its other zero layers are ``zero_layers``)."""
    if isinstance(hypernet, UNetHyperNet):
        return hypernet.controlnet.controlnet_cond_embedding.conv_out
    if isinstance(hypernet, UNet2DHyperNet):
        return hypernet.control_in
    if isinstance(hypernet, TransformerHyperNet):
        return hypernet.control_zero
    raise TypeError(f"no known control path in {type(hypernet).__name__}")


def perturb_zero_layers(hypernet: nn.Module, scale: float = 0.05, seed: int = 1) -> None:
    """Overwrite every zero-initialised layer (``zero_layers`` and the control path's) with seeded
    ``scale * N(0, 1)`` values, as after a few optimiser steps: every HyperNet parameter then gets gradient."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in [*hypernet.zero_layers, control_zero_layer(hypernet)]:
            for p in layer.parameters():
                p.copy_(scale * torch.randn(p.shape, generator=gen))


def perturb_hypernet(hypernet: nn.Module, scale: float = 0.05, seed: int = 1) -> None:
    """Give every parameter of the HyperNet a seeded random offset (as after some optimiser steps), so that its
    zero layers and control path are no longer zero."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in hypernet.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen).to(p.dtype))


__all__ = ["FAMILIES", "LOADERS", "STEPS", "Family", "control_zero_layer", "perturb_hypernet", "perturb_zero_layers"]
