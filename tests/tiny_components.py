"""Tiny, seeded, random diffusers components for fast tests (no downloads).

Shapes: images (B, 1, 32, 32) <-> latents (B, 4, 8, 8); class conditions 0..9 (null class 10) as one
32-dim context token. Import with ``from tiny_components import tiny_generator`` (pytest puts ``tests/`` on
``sys.path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel

from hynea_pl.generators import ClassEmbedding, DiffusionGenerator, LatentDiffusionGenerator
from hynea_pl.methods import HyNeACase
from hynea_pl.suts import SUT, ClassifierSUT, Preprocess
from hynea_pl.zoo.labelled.classifier import SmallCNN

LATENT_SHAPE = (4, 8, 8)
IMAGE_SHAPE = (1, 32, 32)
NUM_CLASSES = 10
CONTEXT_DIM = 32


def tiny_unet(seed: int = 0) -> UNet2DConditionModel:
    """Class-conditional UNet on (4, 8, 8) latents with 32-dim cross-attention (~0.4 M params)."""
    torch.manual_seed(seed)
    return UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=LATENT_SHAPE[1],
        in_channels=LATENT_SHAPE[0],
        out_channels=LATENT_SHAPE[0],
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=CONTEXT_DIM,
        norm_num_groups=32,
    )


def tiny_vae(seed: int = 0) -> AutoencoderKL:
    """1-channel 32x32 <-> 4x8x8 autoencoder. Random weights: ``scaling_factor=1.0`` (no trained latent
    statistics to normalise), so decoded images are neither saturated nor constant."""
    torch.manual_seed(seed)
    return AutoencoderKL(
        in_channels=IMAGE_SHAPE[0],
        out_channels=IMAGE_SHAPE[0],
        down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3,
        block_out_channels=(8, 16, 16),
        layers_per_block=1,
        latent_channels=LATENT_SHAPE[0],
        norm_num_groups=8,
        sample_size=IMAGE_SHAPE[1],
        scaling_factor=1.0,
    )


def tiny_scheduler() -> DDIMScheduler:
    """DDIM with the schedule the embedded MNIST task uses (cosine, 'leading' spacing, alpha_T = 1)."""
    return DDIMScheduler(
        num_train_timesteps=1000,
        beta_schedule="squaredcos_cap_v2",
        timestep_spacing="leading",
        set_alpha_to_one=True,
        clip_sample=False,
    )


def tiny_class_embedding(seed: int = 0) -> ClassEmbedding:
    torch.manual_seed(seed)
    return ClassEmbedding(num_classes=NUM_CLASSES, embedding_dim=CONTEXT_DIM)


def save_tiny_ldm(root: Path) -> Path:
    """Write the tiny components under ``root`` in the layout ``ClassConditionalLDM`` and
    ``LatentDiffusionGenerator.from_pretrained`` read (``unet/``, ``vae/``, ``scheduler/``, ``class_embedding/``)."""
    tiny_unet().save_pretrained(root / "unet")
    tiny_vae().save_pretrained(root / "vae")
    tiny_scheduler().save_pretrained(root / "scheduler")
    tiny_class_embedding().save_pretrained(root / "class_embedding")
    return root


def tiny_generator(**settings: Any) -> LatentDiffusionGenerator:
    """A frozen tiny LDM; ``settings`` override ``num_inference_steps=3, guidance_scale=3.0``."""
    settings = {"num_inference_steps": 3, "guidance_scale": 3.0, **settings}
    return LatentDiffusionGenerator(
        tiny_unet(), tiny_vae(), tiny_scheduler(), tiny_class_embedding(), **settings
    )


@torch.no_grad()
def reference_sample(
    unet: UNet2DConditionModel,
    vae: AutoencoderKL,
    scheduler: Any,
    class_embedding: ClassEmbedding,
    noise: torch.Tensor,
    label: int | None,
    num_inference_steps: int,
    guidance_scale: float,
) -> torch.Tensor:
    """A plain diffusers sampling loop written independently of ``LatentDiffusionGenerator`` (the oracle)."""
    batch = noise.shape[0]
    null = torch.full((batch,), class_embedding.null_class)
    cond = class_embedding(null if label is None else torch.full((batch,), label))
    uncond = class_embedding(null)
    guided = guidance_scale > 1 and label is not None
    scheduler.set_timesteps(num_inference_steps)
    latents = noise * scheduler.init_noise_sigma
    for t in scheduler.timesteps:
        if guided:
            x = scheduler.scale_model_input(torch.cat([latents, latents]), t)
            eps_u, eps_c = unet(x, t, encoder_hidden_states=torch.cat([uncond, cond])).sample.chunk(2)
            eps = eps_u + guidance_scale * (eps_c - eps_u)
        else:
            eps = unet(scheduler.scale_model_input(latents, t), t, encoder_hidden_states=cond).sample
        latents = scheduler.step(eps, t, latents).prev_sample
    images = vae.decode(latents / vae.config.scaling_factor).sample
    return ((images + 1) / 2).clamp(0, 1)


def tiny_sut(seed: int = 0) -> ClassifierSUT:
    """A random 10-class SmallCNN on 1x32x32 images, wrapped as a multiclass SUT."""
    torch.manual_seed(seed)
    model = SmallCNN(channels=(4, 8), hidden=16, dropout=0.0)
    return ClassifierSUT(model, preprocess=Preprocess(size=32, channels=1, mean=[0.5], std=[0.5]))


class ScriptedFlipSUT(ClassifierSUT):
    """Reports a flip (and the target reached) from the ``flip_on``-th step's check on (to test early stopping)."""

    def __init__(self, model: torch.nn.Module, flip_on: int = 3, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.flip_on = flip_on
        self.calls = 0

    def reaches_target(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.is_flipped(output, origin_output, target)

    def is_flipped(self, output: torch.Tensor, origin_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.full(output.shape[:1], self.calls >= self.flip_on, dtype=torch.bool)


class NaNAfterOriginSUT(ClassifierSUT):
    """Behaves like its model for the origin, then returns NaN logits (to test non-finite losses)."""

    def __init__(self, model: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.evaluations = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = super().forward(images)
        self.evaluations += 1
        return logits if torch.is_grad_enabled() is False else logits * float("nan")


class ThirdClassSUT(ClassifierSUT):
    """Reads the first image it sees (the origin) as class 0 with class 1 second, every later image as class 2:
    a flip that does not reach the target (to test that ``flipped`` means the same for every method)."""

    def __init__(self, model: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.calls = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits = super().forward(images)
        label, runner_up = (0, 1) if self.calls == 0 else (2, 3)
        self.calls += 1
        fixed = torch.zeros_like(logits)
        fixed[:, label], fixed[:, runner_up] = 5.0, 2.0
        return fixed + 0 * logits  # keeps the graph: HyNeA back-propagates through it


#: Generator builds per token (FailingBuildLDM).
BUILDS: dict[str, int] = {}


class FailingBuildHyNeA(HyNeACase):
    """HyNeA whose ``fail_on``-th module build (counted per ``token``) raises: the campaign builds a first module
    to check the config, then one per case, so ``fail_on: 2`` fails the first case's build only."""

    def __init__(self, generator: DiffusionGenerator, sut: SUT, origin_class: int | None = 0, seed: int = 0,
                 token: str = "", fail_on: int = 2, **kwargs: Any) -> None:
        BUILDS[token] = BUILDS.get(token, 0) + 1
        if BUILDS[token] == fail_on:
            raise RuntimeError(f"module build {fail_on} failed on purpose")
        super().__init__(generator, sut, origin_class=origin_class, seed=seed, **kwargs)


#: ``fit`` arguments (after ``--config configs/mnist.yaml``) that make its HyNeA the paper's
PAPER_HYNEA = ("--config", "configs/overlays/hynea_paper.yaml")

#: ``fit`` arguments that replace a config's SUT model by :class:`DigitCentroids` (no weights file)
DIGIT_CENTROIDS = ("--sut.init_args.model", "tiny_components.DigitCentroids", "--sut.init_args.weights", "null")


class DigitCentroids(torch.nn.Module):
    """A nearest-centroid digit classifier that needs no training: normalised images ``(B, 1, 32, 32)`` -> logits
    ``(B, 10)``, minus each image's mean squared distance to the class's mean training digit, over ``temperature``.

    Fixed by the digits alone (the tiny zoo profile's training split), it reads the same on every CPU, and every pixel
    moves its logits: a test that needs a search to flip its SUT gets the flip from this setup, not from the luck of
    a trained model. ``fit`` takes it with the arguments :data:`DIGIT_CENTROIDS`.
    """

    def __init__(self, temperature: float = 0.02) -> None:
        super().__init__()
        from hynea_pl.zoo.mnist.data import load_digits
        from hynea_pl.zoo.profiles import get_profile

        data = load_digits(get_profile("tiny").data).method
        digits = (data.train_images - 0.5) / 0.5
        centroids = torch.stack([digits[data.train_labels == c].mean(0) for c in range(NUM_CLASSES)])
        self.register_buffer("centroids", centroids.flatten(1), persistent=False)
        self.temperature = temperature

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        squared = (images.flatten(1)[:, None, :] - self.centroids[None]).pow(2).mean(-1)
        return -squared / self.temperature
