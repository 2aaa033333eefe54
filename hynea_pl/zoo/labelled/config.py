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
class PeopleChanges:
    """What a judge of the verdict learns to read through, as people do, and to refuse, as people do (mixed into a
    judge's config: :class:`JudgeConfig`, :class:`ConvMixerJudgeConfig`).

    Read through (:mod:`hynea_pl.zoo.augment`), each drawn per training image with its probability: a Gaussian blur
    (sigma up to ``blur_max_sigma`` px), dimming (by a factor down to ``dim_min_factor``), strokes broken into
    fragments (keeping at least ``erase_min_keep`` of them), a bright or a dark occluding patch, and a lighter
    background (a grey level up to ``lighting_max_level``). Refuse: ``not_digit_share`` of each batch is images that
    show no digit (:mod:`hynea_pl.zoo.outliers`), labelled with one more class than the profile has, the judge's
    "not a digit" answer (outlier exposure).
    """

    blur_prob: float = 0.25
    blur_max_sigma: float = 1.0
    dim_prob: float = 0.25
    dim_min_factor: float = 0.35
    erase_prob: float = 0.2
    erase_min_keep: float = 0.45
    occlusion_prob: float = 0.25
    lighting_prob: float = 0.25
    lighting_max_level: float = 0.65
    not_digit_share: float = 0.16

    def __post_init__(self) -> None:
        for name in ("blur_prob", "dim_prob", "erase_prob", "occlusion_prob", "lighting_prob", "dim_min_factor",
                     "erase_min_keep", "lighting_max_level"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.not_digit_share < 1:
            raise ValueError(f"not_digit_share must be in [0, 1), got {self.not_digit_share}")
        if self.blur_max_sigma < 0:
            raise ValueError(f"blur_max_sigma must be >= 0, got {self.blur_max_sigma}")


@dataclass(frozen=True)
class JudgeConfig(PeopleChanges, OracleConfig):
    """A judge of the verdict (:class:`~hynea_pl.zoo.labelled.oracle.OracleNet`, a residual CNN) that reads like
    people: the oracle's augmentation plus :class:`PeopleChanges`, and a "not a digit" answer."""


@dataclass(frozen=True)
class ConvMixerJudgeConfig(PeopleChanges, ConvMixerOracleConfig):
    """A judge of the verdict of another family, timm's ConvMixer, trained like :class:`JudgeConfig`."""


@dataclass(frozen=True)
class VoteConfig:
    """How a profile's judges decide together (:func:`hynea_pl.suts.ensemble.panel_decisions`).

    ``threshold``: the judges name a class (or "not a digit", for judges that have that answer) when their mean
    probability of it reaches it, else they are undecided; ``None``: they must be unanimous (every judge's most
    probable class). The MNIST profile's is calibrated on people's readings (``benchmarks/verdict_people.py``).
    """

    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.threshold is not None and not 0.5 <= self.threshold <= 1:
            raise ValueError(f"vote.threshold must be in [0.5, 1] or null (unanimity), got {self.threshold}")


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
    #: each oracle member's accuracy on the held-out digits
    oracle_accuracy: float | None = 0.98
    reconstruction_accuracy: float | None = 0.95
    generated_accuracy: float | None = 0.90
    #: the verdict's valid rate on the held-out real digits (:func:`~hynea_pl.zoo.labelled.gates.measure_ceiling_gates`)
    verdict_ceiling: float | None = 0.97
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
    #: how the judges decide together (the verdict's vote): a threshold calibrated on people's readings
    vote: VoteConfig = field(default_factory=lambda: VoteConfig(threshold=0.625))
    #: the validity oracle's members by name (roles in :data:`hynea_pl.zoo.labelled.oracle.ORACLE_ROLES`): the steering
    #: member ``steer-cnn`` (plain CNN) and three judges of two other families (residual CNN x 2, ConvMixer) that read
    #: like people and can answer "not a digit"
    oracles: dict[str, OracleConfig] = field(default_factory=lambda: {
        "steer-cnn": CNNOracleConfig(max_steps=600, seed=15),
        "oracle-1": JudgeConfig(max_steps=2000, seed=12),
        "oracle-2": JudgeConfig(max_steps=2000, seed=13),
        "judge-convmixer": ConvMixerJudgeConfig(max_steps=2000, seed=16),
    })
