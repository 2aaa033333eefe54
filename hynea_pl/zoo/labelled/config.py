"""A labelled-image profile's training configurations: its data, each model's, the sampler's and the gates'.

The defaults suit 32 px digits (the built-in profiles, :mod:`hynea_pl.zoo.mnist.profiles`); a profile of the user's
own images starts from them (:mod:`hynea_pl.zoo.folder`).

Every field that changes a trained model is part of its cache key (see :mod:`hynea_pl.zoo.cache`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClassifierConfig:
    channels: tuple[int, ...] = (32, 64)
    hidden: int = 128
    dropout: float = 0.25
    lr: float = 2e-3
    max_steps: int = 600
    batch_size: int = 128
    max_shift: int = 2
    seed: int = 1


@dataclass(frozen=True)
class OracleConfig:
    """A validity-oracle member: an :class:`~hynea_pl.zoo.labelled.oracle.OracleNet` and its augmentation, stronger than
    the SUT's: shifts (px), rotations (degrees), scale changes (fraction), stroke-width changes (grey dilation or
    erosion with a ``stroke_kernel`` square, with probability ``stroke_prob``) and elastic deformation (peak
    ``elastic_alpha`` px from ``elastic_grid`` x ``elastic_grid`` control points, with probability ``elastic_prob``)
    and Gaussian pixel noise (std up to ``noise_max_std``, with probability ``noise_prob``: a generator's faint
    grey background otherwise flips a batch-norm network's decisions).
    """

    widths: tuple[int, ...] = (32, 64, 128)
    dropout: float = 0.1
    lr: float = 6e-3
    weight_decay: float = 5e-4
    label_smoothing: float = 0.05
    max_steps: int = 500
    batch_size: int = 128
    max_shift: float = 2.0
    max_rotation: float = 15.0
    max_scale: float = 0.1
    stroke_prob: float = 0.5
    stroke_kernel: int = 2
    elastic_prob: float = 0.3
    elastic_alpha: float = 1.5
    elastic_grid: int = 4
    noise_prob: float = 0.5
    noise_max_std: float = 0.1
    seed: int = 11


@dataclass(frozen=True)
class ConvMixerOracleConfig(OracleConfig):
    """An oracle member of another family: timm's ConvMixer (patch embedding, then ``depth`` blocks of a residual
    depthwise ``kernel_size`` conv and a pointwise conv at ``dim`` channels), trained with the same augmentation."""

    widths: tuple[int, ...] = ()
    dim: int = 96
    depth: int = 6
    kernel_size: int = 5
    patch_size: int = 4


@dataclass(frozen=True)
class CNNOracleConfig(OracleConfig):
    """An oracle member of the plain-CNN family (:class:`~hynea_pl.zoo.labelled.classifier.SmallCNN`: conv stages and max
    pooling, no residuals, no batch norm), trained with the oracle's augmentation."""

    widths: tuple[int, ...] = ()
    channels: tuple[int, ...] = (32, 64)
    hidden: int = 128
    dropout: float = 0.25


@dataclass(frozen=True)
class KNNOracleConfig:
    """The non-neural member: a k-NN vote (:class:`~hynea_pl.zoo.labelled.knn.KNNClassifier`) over deskewed, blurred
    pixels, with the training digits shifted by up to ``shift`` px, rotated by each of ``rotations`` degrees and
    ``elastic_copies`` times elastically deformed as its reference set."""

    k: int = 5
    blur_sigma: float = 1.0
    shift: int = 0
    rotations: tuple[float, ...] = (8.0, -8.0)
    elastic_copies: int = 2
    elastic_alpha: float = 1.5
    elastic_grid: int = 4
    seed: int = 15


@dataclass(frozen=True)
class PixelKNNOracleConfig(KNNOracleConfig):
    """The k-NN member of a profile of images other than digits: no deskewing; each image's blurred grey levels,
    centred on their mean (``standardize``: brightness, contrast and colour do not count)."""

    deskew: bool = False
    standardize: bool = True


@dataclass(frozen=True)
class AutoencoderConfig:
    block_out_channels: tuple[int, ...] = (16, 32, 64)
    layers_per_block: int = 1
    latent_channels: int = 4
    norm_num_groups: int = 16
    lr: float = 2e-3
    max_steps: int = 300
    batch_size: int = 64
    l1_weight: float = 0.5
    kl_weight: float = 1e-5
    seed: int = 3


@dataclass(frozen=True)
class DenoiserConfig:
    block_out_channels: tuple[int, ...] = (48, 96)
    layers_per_block: int = 1
    cross_attention_dim: int = 64
    attention_head_dim: int = 8
    norm_num_groups: int = 16
    num_train_timesteps: int = 1000
    beta_schedule: str = "squaredcos_cap_v2"
    lr: float = 1.5e-3
    max_steps: int = 800
    batch_size: int = 128
    label_dropout: float = 0.1
    snr_gamma: float = 5.0
    ema_decay: float = 0.995
    seed: int = 4


@dataclass(frozen=True)
class SamplerConfig:
    """Default sampler settings of the zoo generator (DDIM, ``leading`` spacing; see REFERENCE.md's trap)."""

    num_inference_steps: int = 20
    guidance_scale: float = 3.0
    eta: float = 0.0


@dataclass(frozen=True)
class GateConfig:
    """Minimum quality a build must reach; ``None`` records the value without enforcing it."""

    sut_accuracy: float | None = 0.985
    #: each trained oracle member's accuracy on the held-out digits; the k-NN judge's: ``knn_accuracy``
    oracle_accuracy: float | None = 0.99
    knn_accuracy: float | None = 0.98
    reconstruction_accuracy: float | None = 0.95
    generated_accuracy: float | None = 0.90
    #: the verdict's valid rate on the held-out real digits (:func:`~hynea_pl.zoo.labelled.gates.measure_ceiling_gates`)
    verdict_ceiling: float | None = 0.93
    max_build_s: float | None = 900.0
    generated_per_class: int = 20
    sample_seed: int = 1234


@dataclass(frozen=True)
class FolderGateConfig(GateConfig):
    """The gates of a profile of the user's images: :class:`GateConfig`'s, plus, for colour images, how well the
    generated images keep the spread of the held-out images' colours (``colour_fidelity``:
    :func:`~hynea_pl.zoo.labelled.gates.colour_fidelity`; grey samples of a colour domain, or samples that lost one
    direction of colour, score near 0)."""

    colour_fidelity: float | None = 0.5


@dataclass(frozen=True)
class ZooProfile:
    """A zoo's training configs: its data (the MNIST digits, or a folder of labelled images:
    :class:`~hynea_pl.zoo.folder.FolderDataConfig`), each model's, the sampler's and the gates'."""

    name: str
    data: Any
    sut: ClassifierConfig = field(default_factory=ClassifierConfig)
    embedder: ClassifierConfig = field(
        default_factory=lambda: ClassifierConfig(
            channels=(8, 16, 32), hidden=64, dropout=0.1, max_steps=200, max_shift=3, seed=2
        )
    )
    autoencoder: AutoencoderConfig = field(default_factory=AutoencoderConfig)
    denoiser: DenoiserConfig = field(default_factory=DenoiserConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    gates: GateConfig = field(default_factory=GateConfig)
    #: the validity oracle's members by name (roles in :data:`hynea_pl.zoo.labelled.oracle.ORACLE_ROLES`): the steering
    #: member ``steer-cnn`` (plain CNN) and four judges of three other families (residual CNN x 2, ConvMixer, k-NN)
    oracles: dict[str, OracleConfig | KNNOracleConfig] = field(default_factory=lambda: {
        "steer-cnn": CNNOracleConfig(max_steps=600, seed=15),
        "oracle-1": OracleConfig(max_steps=700, seed=12),
        "oracle-2": OracleConfig(max_steps=700, seed=13),
        "judge-convmixer": ConvMixerOracleConfig(max_steps=700, seed=16),
        "judge-knn": KNNOracleConfig(),
    })
