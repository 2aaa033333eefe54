"""The digit scenes' unconditional latent diffusion model (issue 17): extras ``scene_autoencoder``, ``scene_ldm``.

The scene tasks' generator is sampled like the paper's CelebA-HQ LDM (``CompVis/ldm-celebahq-256``): a
``UNet2DModel`` denoises the latents of a ``VQModel``, with DDIM, no conditioning. Both are trained on scenes
(:mod:`hynea_pl.zoo.scenes.data`) drawn from the zoo's *training* digits only:

- ``scene_autoencoder``: a small diffusers ``VQModel``, scenes ``1x64x64`` <-> latents ``3x16x16`` (three encoder
  blocks: two downsamplings), a 256-entry codebook of 3-d codes, trained with
  :class:`~hynea_pl.zoo.mnist.autoencoder.AutoencoderTraining` (ink-weighted MSE + the VQ commitment / codebook loss, a
  codebook drawn from the first latents) on 32 px windows around the digits (:class:`SceneAutoencoderConfig`). The entry
  is the ``save_pretrained`` folder (``zoo://<profile>/scene_autoencoder`` resolves to it) plus ``training.json``;
  its ``scaling_factor`` is 1.0 (unscaled; the LDM sets its own).
- ``scene_ldm`` (depends on ``scene_autoencoder``): an unconditional ``UNet2DModel`` on ``3x16x16`` latents
  (attention at the lowest resolution only), trained with :class:`~hynea_pl.zoo.mnist.denoiser.DenoiserTraining`
  (``class_embedding=None``, epsilon prediction, min-SNR weighting, EMA weights) on the autoencoder's
  *pre-quantisation* latents of the training scenes times ``1 / std`` of those latents, with the MNIST zoo's DDPM
  schedule (1000 steps, ``squaredcos_cap_v2``). The entry is ``LDMPipeline``'s layout, what
  :class:`~hynea_pl.generators.unconditional.UnconditionalLDM` loads unchanged
  (``pretrained: zoo://full/scene_ldm`` resolves to the entry folder):

  - ``unet/``: the ``UNet2DModel`` (EMA weights);
  - ``vqvae/``: the autoencoder with that ``scaling_factor`` set explicitly in its config (``UnconditionalLDM``
    divides the latents by it before the decoder quantises them, ``LDMPipeline``'s convention);
  - ``scheduler/``: a ``DDIMScheduler`` with the training schedule, ``timestep_spacing="leading"`` and
    ``set_alpha_to_one=True`` (what the CelebA-HQ LDM's scheduler config gives, and the MNIST zoo's sampler);
  - ``config.json``: the training config, the scaling factor, the latent shape, the autoencoder entry used.

Gates (``None`` records a value without enforcing it):

- ``scene_autoencoder``, on held-out scenes drawn from the held-out digits (the held-out half of
  :func:`~hynea_pl.zoo.scenes.data.scene_split`): ``recon_psnr`` (dB, of the mean squared error over all pixels; >= 28
  for ``full``, where reconstructed digits are sharp: see :class:`SceneAutoencoderConfig`), ``recon_mse``, ``blank_psnr``
  (the PSNR an all-black reconstruction gets: scenes are ~97 % background, so this is the floor the autoencoder
  must clear), ``codebook_usage`` (fraction of the codes the held-out latents quantise to);
  ``reconstructions.png`` (originals over reconstructions) is kept with the gates.
- ``scene_ldm``, on ``n_generated`` scenes sampled by ``UnconditionalLDM`` from the entry (DDIM, 50 steps, eta 0,
  seeded noise; ``samples.png`` kept): pixel statistics against as many held-out real scenes (``mean_intensity``,
  ``real_mean_intensity``, ``ink_fraction`` / ``real_ink_fraction`` of pixels > 0.5, and ``intensity_hist_l1``,
  the L1 distance of the two 16-bin intensity histograms, a cheap realism proxy: 0 same, 2 disjoint; all
  recorded), and the cross gates with the scene SUTs (``gated_by``: built before measuring, never part of this
  entry's key): ``detected_scene_rate``, the fraction of generated scenes in which the ``detector_sut`` finds at
  least one digit with confidence > 0.5 (>= 0.9 for ``full``), and ``attribute_agreement``, how well the
  ``attribute_sut``'s set of present digits (logit > 0) and the detector's set of detected classes (confidence >
  0.5) agree: their mean Jaccard index over the scenes with a detection (:func:`cross_scores`; >= 0.8 for
  ``full``), plus ``attribute_scene_rate`` (scenes with at least one attribute on; recorded) and the same three
  scores of the held-out real scenes (``real_*``, recorded: the reference the generated scenes are held to).
- both: the build time, a budget (the scene components share 15 minutes on 2 cores; these two were given 420 s).
  Measured (2026-12-03): the autoencoder 186 s; the LDM (:class:`SceneLDMConfig`'s defaults) about 3500 s with one
  thread, and its cross gates still missed (detected 0.875, agreement 0.637; real scenes 0.97, 0.90). Every UNet
  tried levelled off near 0.62 agreement (README, "Digit scenes").
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from diffusers import DDIMScheduler, DDPMScheduler, UNet2DModel, VQModel
from torch.utils.data import TensorDataset
from torchvision.utils import save_image

from hynea_pl.zoo.mnist.autoencoder import AutoencoderTraining, encode_latents, reconstruct
from hynea_pl.zoo.mnist.denoiser import EMA, DenoiserTraining
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BuildContext, Component
from hynea_pl.zoo.scenes.data import DigitScenes, SceneConfig, make_scenes, scene_split, windows_around_digits

#: The subfolders of a ``scene_ldm`` entry (``LDMPipeline``'s layout, what ``UnconditionalLDM`` loads).
LDM_LAYOUT = ("unet", "vqvae", "scheduler")


@dataclass(frozen=True)
class SceneAutoencoderConfig:
    """The scene ``VQModel`` and its training on ``n_scenes`` training scenes drawn from ``scene_seed`` (every
    field is part of its cache key).

    The codebook is drawn from a Gaussian fitted (per channel) to the untrained encoder's latents of the first
    ``codebook_init_scenes`` training scenes (:func:`init_codebook`): diffusers' U(-1/n, 1/n) or an N(0, 1) draw
    leave most codes far from the latents, which then collapse onto a handful of codes.

    Scenes are ~97 % background, so whole-scene MSE first trains toward all black: 180 steps on whole scenes
    reached 17.6 dB (the all-black floor is 16.3) and reconstructions in which the detector found no digit. The
    network is fully convolutional, so it trains on ``window_size`` px windows centred on digits
    (:func:`~hynea_pl.zoo.scenes.data.windows_around_digits`, ``windows_per_scene`` per scene, 4x cheaper than whole
    scenes) with the MSE of ink pixels weighted ``1 + ink_weight`` and a one-cycle learning rate; it still encodes
    whole scenes. Measured on the full profile, one thread, the other core busy: this config's build reached 30.0 dB
    on held-out whole scenes in 186 s (24.0 dB without the warm-up); an experiment drawing fresh windows every step
    reached 32.1 dB after 600 steps and 33.0 after 1200 (417 s), and the detector found a digit in 0.985 of its
    reconstructions (real scenes: 0.97)."""

    block_out_channels: tuple[int, ...] = (16, 32, 64)
    layers_per_block: int = 1
    latent_channels: int = 3
    num_vq_embeddings: int = 256
    norm_num_groups: int = 8
    codebook_init_scenes: int = 256
    n_scenes: int = 4000
    scene_seed: int = 370
    scenes: SceneConfig = field(default_factory=SceneConfig)
    window_size: int = 32  # train on windows around digits (0: whole scenes)
    windows_per_scene: int = 2
    window_jitter: int = 6
    ink_weight: float = 5.0
    warmup_fraction: float = 0.1  # one-cycle: with a plain cosine from lr the same build reached 24.0 dB, not 30.0
    lr: float = 5e-3
    max_steps: int = 600
    batch_size: int = 32
    l1_weight: float = 0.0
    vq_weight: float = 0.25
    seed: int = 371


@dataclass(frozen=True)
class SceneLDMConfig:
    """The unconditional ``UNet2DModel`` (plain down / up blocks, attention in the ``attention_levels`` lowest ones)
    and its training on the autoencoder latents of ``n_scenes`` training scenes (every field is part of its cache
    key). These defaults gave detected 0.875 / agreement 0.637 in 5000 steps; (32, 64, 96) with attention at 4x4
    only and 4000 scenes gave 0.865 / 0.61 in 4900 steps and 0.875 / 0.61 in 8900."""

    block_out_channels: tuple[int, ...] = (48, 96, 128)
    layers_per_block: int = 1
    attention_levels: int = 2  # self-attention in the lowest levels (2: at 8x8 and 4x4 latents)
    attention_head_dim: int = 32
    norm_num_groups: int = 16
    n_scenes: int = 12000
    scene_seed: int = 370  # the autoencoder's training scenes (its first n_scenes)
    scenes: SceneConfig = field(default_factory=SceneConfig)
    num_train_timesteps: int = 1000
    beta_schedule: str = "squaredcos_cap_v2"  # the MNIST zoo's
    lr: float = 2e-3
    max_steps: int = 5000
    batch_size: int = 64
    snr_gamma: float = 5.0
    ema_decay: float = 0.995
    seed: int = 372


@dataclass(frozen=True)
class SceneAutoencoderGates:
    """Gates on ``n_scenes`` held-out scenes (held-out digits, drawn from ``scene_seed + 1``)."""

    n_scenes: int = 500
    scene_seed: int = 3700
    min_psnr: float | None = 28.0
    max_build_s: float | None = 150.0


@dataclass(frozen=True)
class SceneLDMGates:
    """Gates on ``n_generated`` scenes sampled with ``num_inference_steps`` DDIM steps from ``sample_seed``, against
    as many held-out real scenes (held-out digits, drawn from ``scene_seed + 1``)."""

    n_generated: int = 200
    num_inference_steps: int = 50
    sample_seed: int = 4242
    scene_seed: int = 3800
    min_confidence: float = 0.5
    min_detected_rate: float | None = 0.9
    min_agreement: float | None = 0.8
    max_build_s: float | None = 270.0


AUTOENCODER_CONFIGS = {
    "full": SceneAutoencoderConfig(),
    "tiny": SceneAutoencoderConfig(block_out_channels=(8, 8, 8), num_vq_embeddings=32, codebook_init_scenes=16,
                                   n_scenes=32, max_steps=3, batch_size=16),
}
LDM_CONFIGS = {
    "full": SceneLDMConfig(),
    "tiny": SceneLDMConfig(block_out_channels=(16, 16, 16), attention_head_dim=8, norm_num_groups=8, n_scenes=32,
                           max_steps=3, batch_size=16),
}
AUTOENCODER_GATES = {
    "full": SceneAutoencoderGates(),
    "tiny": SceneAutoencoderGates(n_scenes=16, min_psnr=None, max_build_s=None),
}
LDM_GATES = {
    "full": SceneLDMGates(),
    "tiny": SceneLDMGates(n_generated=8, num_inference_steps=3, min_detected_rate=None, min_agreement=None,
                          max_build_s=None),
}


# ---------------------------------------------------------------------- the autoencoder
def make_vqmodel(cfg: SceneAutoencoderConfig, size: int = 64) -> VQModel:
    """A fresh 1-channel ``VQModel`` of ``cfg`` (seed it first); ``scaling_factor`` 1.0 (unscaled latents)."""
    n_blocks = len(cfg.block_out_channels)
    vq = VQModel(
        in_channels=1, out_channels=1, down_block_types=("DownEncoderBlock2D",) * n_blocks,
        up_block_types=("UpDecoderBlock2D",) * n_blocks, block_out_channels=tuple(cfg.block_out_channels),
        layers_per_block=cfg.layers_per_block, latent_channels=cfg.latent_channels,
        num_vq_embeddings=cfg.num_vq_embeddings, vq_embed_dim=cfg.latent_channels,
        norm_num_groups=cfg.norm_num_groups, sample_size=size, scaling_factor=1.0,
    )
    return vq


@torch.no_grad()
def init_codebook(vq: VQModel, images: torch.Tensor, seed: int) -> None:
    """Draw ``vq``'s codebook from N(mean, std), per channel, of its encoder's latents of ``images`` in [0, 1]."""
    latents = encode_latents(vq, images).movedim(1, -1).reshape(-1, vq.config.latent_channels)
    weight = vq.quantize.embedding.weight
    noise = torch.randn(weight.shape, generator=torch.Generator().manual_seed(seed))
    weight.copy_(latents.mean(0) + latents.std(0) * noise)
    vq.train()


def training_scenes(cfg: SceneAutoencoderConfig | SceneLDMConfig, context: BuildContext) -> DigitScenes:
    """``cfg.n_scenes`` scenes of the profile's training digits, drawn from ``cfg.scene_seed``."""
    data = context.data
    return make_scenes(data.train_images, data.train_labels, cfg.n_scenes, cfg.scene_seed, cfg.scenes)


def train_scene_autoencoder(cfg: SceneAutoencoderConfig, context: BuildContext, out: Path) -> VQModel:
    """Train the scene ``VQModel``; ``save_pretrained`` it to ``out`` with ``training.json``."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training scene_autoencoder (VQModel {list(cfg.block_out_channels)}, "
                        f"{cfg.n_scenes} scenes, {cfg.max_steps} steps of batch {cfg.batch_size})")
    scenes = training_scenes(cfg, context)
    torch.manual_seed(cfg.seed)
    vq = make_vqmodel(cfg, scenes.images.shape[-1])
    if cfg.codebook_init_scenes:
        init_codebook(vq, scenes.images[:cfg.codebook_init_scenes], cfg.seed)
    images = scenes.images
    if cfg.window_size:
        images = windows_around_digits(scenes, cfg.window_size, cfg.windows_per_scene, cfg.window_jitter, cfg.seed)
    module = AutoencoderTraining(vq, cfg.lr, cfg.max_steps, l1_weight=cfg.l1_weight, vq_weight=cfg.vq_weight,
                                 ink_weight=cfg.ink_weight, warmup_fraction=cfg.warmup_fraction)
    seconds = train.fit(module, TensorDataset(images), cfg.batch_size, cfg.max_steps, cfg.seed,
                        name="scene_autoencoder")
    vq.eval()
    vq.save_pretrained(out)
    (out / "training.json").write_text(json.dumps({**dataclasses.asdict(cfg), "train_s": seconds}, indent=2))
    return vq


def load_scene_autoencoder(entry: Path) -> VQModel:
    """The frozen ``VQModel`` of a ``scene_autoencoder`` entry (eval mode): scenes ``(B, 1, 64, 64)`` in [-1, 1]
    <-> latents ``(B, 3, 16, 16)``; see :func:`~hynea_pl.zoo.mnist.autoencoder.encode_latents` / ``reconstruct``."""
    return VQModel.from_pretrained(Path(entry)).requires_grad_(False).eval()


def psnr(mse: float) -> float:
    """PSNR in dB of a mean squared error of images in [0, 1]."""
    return 10 * math.log10(1 / max(mse, 1e-12))


@torch.no_grad()
def codebook_usage(vq: VQModel, images: torch.Tensor) -> float:
    """The fraction of ``vq``'s codes that the pre-quantisation latents of ``images`` in [0, 1] quantise to."""
    latents = encode_latents(vq, images)
    codes = vq.quantize(latents)[2][2]  # (z_q, loss, (perplexity, min_encodings, indices))
    return codes.unique().numel() / vq.config.num_vq_embeddings


def measure_scene_autoencoder(gates: SceneAutoencoderGates, entry: Path, context: BuildContext,
                              out: Path) -> list[Gate]:
    """The module doc's autoencoder gates on held-out scenes (held-out digits only)."""
    cfg: SceneAutoencoderConfig = AUTOENCODER_CONFIGS[context.profile.name]
    _, held_out = scene_split(context.data, 0, gates.n_scenes, gates.scene_seed, cfg.scenes)
    vq = load_scene_autoencoder(entry)
    images = held_out.images
    recon = reconstruct(vq, images, batch_size=250)
    mse = torch.mean((recon - images) ** 2).item()
    save_image(torch.cat([images[:16], recon[:16]]), out / "reconstructions.png", nrow=16, padding=1)
    return [
        Gate("recon_psnr", psnr(mse), gates.min_psnr),
        Gate("recon_mse", mse, None, higher_is_better=False),
        Gate("blank_psnr", psnr(torch.mean(images**2).item()), None),
        Gate("codebook_usage", codebook_usage(vq, images), None),
    ]


# ---------------------------------------------------------------------- the LDM
def make_unet(cfg: SceneLDMConfig, latent_shape: Sequence[int]) -> UNet2DModel:
    """A fresh unconditional ``UNet2DModel`` on ``latent_shape`` ``(C, h, w)`` latents (seed it first): plain
    down / up blocks, attention only in the ``cfg.attention_levels`` lowest-resolution ones."""
    channels, size = latent_shape[0], latent_shape[-1]
    n_blocks = len(cfg.block_out_channels)
    n_attention = min(cfg.attention_levels, n_blocks)
    return UNet2DModel(
        sample_size=size, in_channels=channels, out_channels=channels,
        block_out_channels=tuple(cfg.block_out_channels), layers_per_block=cfg.layers_per_block,
        down_block_types=("DownBlock2D",) * (n_blocks - n_attention) + ("AttnDownBlock2D",) * n_attention,
        up_block_types=("AttnUpBlock2D",) * n_attention + ("UpBlock2D",) * (n_blocks - n_attention),
        attention_head_dim=cfg.attention_head_dim, norm_num_groups=cfg.norm_num_groups,
    )


def inference_scheduler(cfg: SceneLDMConfig) -> DDIMScheduler:
    """DDIM on the training schedule, ``leading`` spacing, ``set_alpha_to_one`` (as the MNIST zoo's
    :func:`hynea_pl.zoo.mnist.train.inference_scheduler` and the CelebA-HQ LDM's scheduler config)."""
    return DDIMScheduler(
        num_train_timesteps=cfg.num_train_timesteps, beta_schedule=cfg.beta_schedule, prediction_type="epsilon",
        timestep_spacing="leading", set_alpha_to_one=True, clip_sample=False,
    )


def train_scene_ldm(cfg: SceneLDMConfig, context: BuildContext, out: Path) -> None:
    """Encode the training scenes with the ``scene_autoencoder``, scale them to unit std, train the UNet; write the
    module doc's entry layout to ``out``."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training scene_ldm (UNet2DModel {list(cfg.block_out_channels)}, "
                        f"{cfg.n_scenes} scenes, {cfg.max_steps} steps of batch {cfg.batch_size})")
    autoencoder = context.deps["scene_autoencoder"]
    vq = load_scene_autoencoder(autoencoder)
    latents = encode_latents(vq, training_scenes(cfg, context).images, batch_size=250)
    scaling_factor = float(1.0 / latents.std())
    latents = latents * scaling_factor
    torch.manual_seed(cfg.seed)
    unet = make_unet(cfg, latents.shape[1:])
    noise_scheduler = DDPMScheduler(num_train_timesteps=cfg.num_train_timesteps, beta_schedule=cfg.beta_schedule,
                                    prediction_type="epsilon")
    module = DenoiserTraining(unet, None, noise_scheduler, cfg.lr, cfg.max_steps, snr_gamma=cfg.snr_gamma)
    seconds = train.fit(module, TensorDataset(latents), cfg.batch_size, cfg.max_steps, cfg.seed,
                        callbacks=[EMA(cfg.ema_decay)], name="scene_ldm")
    unet.eval()
    unet.save_pretrained(out / "unet")
    vq.register_to_config(scaling_factor=scaling_factor)  # explicit: UnconditionalLDM reads it
    vq.save_pretrained(out / "vqvae")
    inference_scheduler(cfg).save_pretrained(out / "scheduler")
    config = {
        "generator": "hynea_pl.generators.unconditional.UnconditionalLDM", "layout": [f"{d}/" for d in LDM_LAYOUT],
        "scaling_factor": scaling_factor, "latent_shape": list(latents.shape[1:]), "autoencoder": autoencoder.name,
        "training": dataclasses.asdict(cfg), "train_s": seconds,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))


def load_scene_ldm(entry: Path, num_inference_steps: int = 20, **settings: Any):
    """The frozen :class:`~hynea_pl.generators.unconditional.UnconditionalLDM` of a ``scene_ldm`` entry (its
    settings overridable): seeded noise ``(B, 3, 16, 16)`` -> scenes ``(B, 1, 64, 64)`` in [0, 1]."""
    from hynea_pl.generators.unconditional import UnconditionalLDM

    return UnconditionalLDM(str(entry), num_inference_steps=num_inference_steps, **settings)


@torch.no_grad()
def generate_scenes(generator, n: int, seed: int, batch_size: int = 50) -> torch.Tensor:
    """``n`` scenes ``(n, 1, 64, 64)`` in [0, 1] from one seeded noise draw, sampled in batches."""
    noise = torch.randn((n, *generator.latent_shape), generator=torch.Generator().manual_seed(seed))
    return torch.cat([generator.sample(noise[i:i + batch_size]) for i in range(0, n, batch_size)])


def pixel_statistics(generated: torch.Tensor, real: torch.Tensor, bins: int = 16) -> dict[str, float]:
    """Mean intensity and ink fraction (pixels > 0.5) of both sets, and the L1 distance of their ``bins``-bin
    intensity histograms (each normalised to sum 1)."""

    def histogram(images: torch.Tensor) -> torch.Tensor:
        counts = torch.histc(images.float().clamp(0, 1), bins=bins, min=0.0, max=1.0)
        return counts / counts.sum()

    return {
        "mean_intensity": generated.mean().item(), "real_mean_intensity": real.mean().item(),
        "ink_fraction": (generated > 0.5).float().mean().item(),
        "real_ink_fraction": (real > 0.5).float().mean().item(),
        "intensity_hist_l1": (histogram(generated) - histogram(real)).abs().sum().item(),
    }


# ---------------------------------------------------------------------- cross gates with the scene SUTs
def detected_classes(rows: Sequence[Sequence[float]], min_confidence: float = 0.5) -> set[int]:
    """The classes of a scene's detection ``rows`` ``(x0, y0, x1, y1, class, confidence)`` with confidence >
    ``min_confidence``."""
    return {int(row[4]) for row in rows if row[5] > min_confidence}


def present_attributes(logits: torch.Tensor) -> set[int]:
    """The attributes (digits) with logit > 0 of one scene's logits ``(10,)``."""
    return set(torch.nonzero(logits > 0).flatten().tolist())


def cross_scores(detections: Sequence[Sequence[Sequence[float]]], logits: torch.Tensor,
                 min_confidence: float = 0.5) -> dict[str, float]:
    """Detector / attribute SUT consistency over scenes, from the detector's rows per scene (all its candidates, as
    ``YOLODetectorSUT.boxes`` gives them) and the attribute SUT's ``logits (N, 10)``:

    - ``detected_scene_rate``: scenes with at least one detection of confidence > ``min_confidence``;
    - ``attribute_agreement``: over the scenes with at least one such detection, the mean Jaccard index of the
      set of attributes with logit > 0 and the set of detected classes (1 when they are equal; 0 when no scene has
      a detection: two empty sets never count as agreement, so blank samples cannot pass this gate). Jaccard, not
      set equality: on 200 held-out *real* scenes each SUT reads exactly the true digits in only about 80 % of
      scenes (a digit partly covered by another, a small 1), so the two sets are equal in 0.78 of them while their
      mean Jaccard index is 0.90;
    - ``attribute_scene_rate``: scenes with at least one attribute with logit > 0.
    """
    if len(detections) != len(logits):
        raise ValueError(f"{len(detections)} scenes of detections but {len(logits)} of logits")
    detected = [detected_classes(rows, min_confidence) for rows in detections]
    present = [present_attributes(row) for row in logits]
    n = max(len(detected), 1)
    n_detected = sum(bool(d) for d in detected)
    return {
        "detected_scene_rate": n_detected / n,
        "attribute_agreement": sum(len(d & p) / len(d | p) for d, p in zip(detected, present, strict=True) if d)
        / max(n_detected, 1),
        "attribute_scene_rate": sum(bool(p) for p in present) / n,
    }


@torch.no_grad()
def scene_detections(detector, images: torch.Tensor, batch_size: int = 50) -> list[list[list[float]]]:
    """Every candidate of a :class:`~hynea_pl.suts.YOLODetectorSUT` per scene (its ``top_k`` raised to all of them
    for the call: a scene's digits are not all among its top 5 candidates, which may all sit on one digit)."""
    previous = detector.top_k
    detector.top_k = int(detector.candidate_logits(images[:1]).shape[-1])
    try:
        return [rows for i in range(0, len(images), batch_size) for rows in detector.boxes(images[i:i + batch_size])]
    finally:
        detector.top_k = previous


def load_cross_suts(context: BuildContext) -> tuple[Any, Any]:
    """The ``detector_sut`` and ``attribute_sut`` of ``context.deps`` (built by ``gated_by``), frozen."""
    from hynea_pl.zoo.scenes.attributes import load_attribute_sut
    from hynea_pl.zoo.scenes.detector import load_detector

    return load_detector(context.deps["detector_sut"]), load_attribute_sut(context.deps["attribute_sut"])


def measure_scene_ldm(gates: SceneLDMGates, entry: Path, context: BuildContext, out: Path) -> list[Gate]:
    """The module doc's LDM gates: sample with ``UnconditionalLDM`` from the entry, compare with held-out scenes,
    score the samples with the scene SUTs."""
    from hynea_pl.zoo.scenes.attributes import attribute_logits

    cfg: SceneLDMConfig = LDM_CONFIGS[context.profile.name]
    generator = load_scene_ldm(entry, num_inference_steps=gates.num_inference_steps, eta=0.0)
    images = generate_scenes(generator, gates.n_generated, gates.sample_seed)
    save_image(images, out / "samples.png", nrow=20, padding=1)
    _, real = scene_split(context.data, 0, gates.n_generated, gates.scene_seed, cfg.scenes)
    stats = pixel_statistics(images, real.images)
    detector, attributes = load_cross_suts(context)
    cross = cross_scores(scene_detections(detector, images), attribute_logits(attributes, images),
                         gates.min_confidence)
    real_cross = cross_scores(scene_detections(detector, real.images), attribute_logits(attributes, real.images),
                              gates.min_confidence)
    return [
        *(Gate(name, value, None) for name, value in stats.items()),
        Gate("detected_scene_rate", cross["detected_scene_rate"], gates.min_detected_rate),
        Gate("attribute_agreement", cross["attribute_agreement"], gates.min_agreement),
        Gate("attribute_scene_rate", cross["attribute_scene_rate"], None),
        *(Gate(f"real_{name}", value, None) for name, value in real_cross.items()),
    ]


#: This module's zoo components (read by :mod:`hynea_pl.zoo.registry`).
ZOO_COMPONENTS = (
    Component(
        name="scene_autoencoder", train_configs=AUTOENCODER_CONFIGS, gate_configs=AUTOENCODER_GATES,
        train=train_scene_autoencoder, measure=measure_scene_autoencoder, load=load_scene_autoencoder, base_gated=False,
        description="digit scenes' VQModel autoencoder: 1x64x64 <-> 3x16x16 latents, 256 codes (diffusers folder)",
    ),
    Component(
        name="scene_ldm", train_configs=LDM_CONFIGS, gate_configs=LDM_GATES, train=train_scene_ldm,
        measure=measure_scene_ldm, load=load_scene_ldm, depends=("scene_autoencoder",),
        gated_by=("detector_sut", "attribute_sut"), base_gated=False,
        description="digit scenes' unconditional LDM: UNet2DModel + VQModel + DDIM (UnconditionalLDM's folder layout)",
    ),
)

__all__ = [
    "AUTOENCODER_CONFIGS", "AUTOENCODER_GATES", "LDM_CONFIGS", "LDM_GATES", "LDM_LAYOUT", "SceneAutoencoderConfig",
    "SceneAutoencoderGates", "SceneLDMConfig", "SceneLDMGates", "codebook_usage", "cross_scores",
    "detected_classes", "generate_scenes", "inference_scheduler", "init_codebook", "load_cross_suts",
    "load_scene_autoencoder", "load_scene_ldm", "make_unet", "make_vqmodel", "measure_scene_autoencoder",
    "measure_scene_ldm",
    "pixel_statistics", "present_attributes", "psnr", "scene_detections", "train_scene_autoencoder",
    "train_scene_ldm", "training_scenes",
]
