"""The ``stylegan`` zoo extra: its training configs (full / tiny), training, quality gates and loader.

Built on first use of ``zoo://<profile>/stylegan`` / ``Zoo.extra("stylegan")``, or by ``python -m hynea_pl zoo
build`` (see :mod:`hynea_pl.zoo.registry`); the base zoo (the MNIST demo) never builds it. The entry holds the EMA
generator (``model.safetensors`` + ``config.json`` with class path and init args).

Gates on 200 generated digits (20 per class, one seeded z batch, constant noise): the SUT's accuracy against
their class at psi = 1.0 (>= 0.85) and psi = 0.7 (>= 0.95) and on its worst class (recorded), the oracle judges'
accuracy (recorded), FID against the held-out digits in the zoo embedder's feature space (recorded), the diversity at
psi = 1.0 (the mean within-class pairwise pixel distance of the generated digits over that of as many held-out
digits per class: 1 as varied as real digits, 0 a class collapsed to one image) and the build time (<= 360 s, a
budget).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torchvision.utils import save_image

from hynea_pl.zoo.labelled.classifier import accuracy
from hynea_pl.zoo.labelled.gates import probabilities
from hynea_pl.zoo.labelled.zoo import load_zoo
from hynea_pl.zoo.mnist.data import IMAGE_SIZE, NUM_CLASSES
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BuildContext, Component
from hynea_pl.zoo.splits import ImageSplit
from hynea_pl.zoo.stylegan import ProjectionDiscriminator, StyleGANTraining, StyleGenerator


@dataclass(frozen=True)
class StyleGANConfig:
    """Architecture and training of the zoo's style-based GAN (every field is part of its cache key)."""

    z_dim: int = 64
    w_dim: int = 128
    channels: tuple[int, ...] = (64, 64, 32, 16)  # synthesis features at 4, 8, 16, 32 px
    mapping_layers: int = 4
    mapping_lr_multiplier: float = 0.01
    d_channels: tuple[int, ...] = (16, 32, 64, 128)  # discriminator features at 32, 16, 8, 4 px
    lr: float = 2e-3
    r1_gamma: float = 0.1
    r1_interval: int = 16
    mixing_prob: float = 0.5
    ema_kimg: float = 5.0
    # AC-GAN class term on the discriminator's auxiliary head (trained on the real digits' labels, never the SUT):
    # without it one class collapsed into another digit in two of three builds (see the README)
    aux_weight: float = 1.0
    batch_size: int = 32
    max_steps: int = 2600  # batches (each one D step and one G step); 352 s with 2 threads on an idle machine
    seed: int = 21


@dataclass(frozen=True)
class StyleGANGates:
    """``None`` records a value without enforcing it."""

    per_class: int = 20
    sample_seed: int = 4321
    sut_accuracy: float | None = 0.85  # psi = 1.0
    sut_accuracy_truncated: float | None = 0.95  # psi = truncation_psi
    truncation_psi: float = 0.7
    min_diversity: float | None = None  # within-class pixel spread of generated / held-out digits at psi = 1.0
    max_build_s: float | None = 360.0


TRAIN_CONFIGS = {
    "full": StyleGANConfig(),
    "tiny": StyleGANConfig(z_dim=8, w_dim=16, channels=(16, 16, 8, 8), mapping_layers=2, d_channels=(8, 8, 16, 16),
                           batch_size=16, max_steps=4, r1_interval=2),
}
GATE_CONFIGS = {
    "full": StyleGANGates(),
    "tiny": StyleGANGates(per_class=2, sut_accuracy=None, sut_accuracy_truncated=None, max_build_s=None),
}


def train_stylegan(cfg: StyleGANConfig, context: BuildContext, out: Path) -> StyleGenerator:
    """Train on the zoo's training digits; save the EMA generator to ``out``."""
    from hynea_pl.zoo import train

    train.console.print(f"[bold]zoo[/]: training stylegan (synthesis {list(cfg.channels)}, "
                        f"{cfg.max_steps} steps of batch {cfg.batch_size})")
    data: ImageSplit = context.data.method  # a method's generator: the method's digits
    torch.manual_seed(cfg.seed)
    generator = StyleGenerator(cfg.z_dim, cfg.w_dim, NUM_CLASSES, IMAGE_SIZE, 1, cfg.channels, cfg.mapping_layers,
                               cfg.mapping_lr_multiplier)
    discriminator = ProjectionDiscriminator(NUM_CLASSES, IMAGE_SIZE, 1, cfg.d_channels)
    module = StyleGANTraining(generator, discriminator, cfg.lr, cfg.r1_gamma, cfg.r1_interval, cfg.mixing_prob,
                              cfg.ema_kimg, aux_weight=cfg.aux_weight)
    # manual optimisation: Lightning counts both optimisers' steps
    seconds = train.fit(module, data.dataset(), cfg.batch_size, 2 * cfg.max_steps, cfg.seed, name="stylegan")
    g_ema = module.g_ema.eval()
    save_file({k: v.contiguous() for k, v in g_ema.state_dict().items()}, str(out / "model.safetensors"))
    config = {"class_path": f"{StyleGenerator.__module__}.{StyleGenerator.__qualname__}",
              "init_args": g_ema.init_args, "training": dataclasses.asdict(cfg), "train_s": seconds,
              "output_range": [-1, 1]}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return g_ema


def load_stylegan(entry: Path) -> StyleGenerator:
    """The frozen EMA generator of a ``stylegan`` entry (eval mode)."""
    config = json.loads((Path(entry) / "config.json").read_text())
    generator = StyleGenerator(**config["init_args"])
    generator.load_state_dict(load_file(str(Path(entry) / "model.safetensors")))
    return generator.eval().requires_grad_(False)


@torch.no_grad()
def sample_digits(generator: StyleGenerator, per_class: int, seed: int, psi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` digits of every class from one seeded z batch: images ``(10 * per_class, 1, 32, 32)`` in
    [0, 1] and their labels, class-major; constant noise."""
    labels = torch.arange(NUM_CLASSES).repeat_interleave(per_class)
    z = torch.randn(len(labels), generator.z_dim, generator=torch.Generator().manual_seed(seed))
    images = generator(z, labels, truncation_psi=psi, noise_mode="const")
    return ((images + 1) / 2).clamp(0, 1), labels


def within_class_spread(images: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean over classes of the mean pairwise L2 distance between the flattened images ``(N, 1, H, W)`` of one
    class (:func:`~hynea_pl.metrics.functional.embedding.pairwise_distance_diversity`; a class collapsed to one
    image scores 0)."""
    from hynea_pl.metrics.functional.embedding import pairwise_distance_diversity
    from hynea_pl.metrics.functional.image import l2_distance

    l2 = functools.partial(l2_distance, mode="sum")  # the plain Euclidean norm of the difference
    spreads = [pairwise_distance_diversity(images[labels == k], l2)
               for k in labels.unique() if (labels == k).sum() > 1]
    return torch.stack(spreads).mean().item()


def held_out_per_class(images: torch.Tensor, labels: torch.Tensor, per_class: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``per_class`` held-out digits of every class, class-major."""
    keep = torch.cat([torch.nonzero(labels == k).flatten()[:per_class] for k in range(NUM_CLASSES)])
    return images[keep], labels[keep]


def measure_stylegan(gates: StyleGANGates, entry: Path, context: BuildContext, out: Path) -> list[Gate]:
    """The gates of the module doc at psi = 1.0 and at ``gates.truncation_psi``; grids to ``out/samples_psi*.png``."""
    from hynea_pl.metrics.realism import realism_scores

    zoo, data = load_zoo(context.profile), context.data.method  # the base zoo: built on first use
    generator, sut, embedder = load_stylegan(entry), zoo.sut(), zoo.embedder()
    judges = [zoo.oracle(name) for name in zoo.oracle_names()["judges"]]
    result = []
    for psi, threshold in ((1.0, gates.sut_accuracy), (gates.truncation_psi, gates.sut_accuracy_truncated)):
        images, labels = sample_digits(generator, gates.per_class, gates.sample_seed, psi)
        save_image(images, out / f"samples_psi{psi:g}.png", nrow=gates.per_class, padding=1)
        ensemble = torch.stack([probabilities(judge, images) for judge in judges]).mean(0)
        fid = realism_scores(images, data.test_images, embedder)["fid"]
        # the same number of digits per class: the overall accuracy is the mean of the per-class ones
        per_class = [accuracy(sut, images[labels == k], labels[labels == k]) for k in range(NUM_CLASSES)]
        result += [
            Gate(f"sut_accuracy_psi{psi:g}", sum(per_class) / NUM_CLASSES, threshold),
            Gate(f"sut_worst_class_accuracy_psi{psi:g}", min(per_class), None),
            Gate(f"oracle_judges_accuracy_psi{psi:g}", (ensemble.argmax(-1) == labels).float().mean().item(), None),
            Gate(f"fid_psi{psi:g}", fid, None, higher_is_better=False),
        ]
        if psi == 1.0:  # intra-class mode collapse: the spread of a class's digits against real ones
            real = within_class_spread(*held_out_per_class(data.test_images, data.test_labels, gates.per_class))
            result.append(Gate("diversity_psi1", within_class_spread(images, labels) / real, gates.min_diversity))
    return result


#: This module's zoo components (read by :mod:`hynea_pl.zoo.registry`).
ZOO_COMPONENTS = (
    Component(
        name="stylegan", train_configs=TRAIN_CONFIGS, gate_configs=GATE_CONFIGS, train=train_stylegan,
        measure=measure_stylegan, load=load_stylegan,
        description="class-conditional style-based GAN (NVIDIA interface: mapping, synthesis, w_avg, num_ws)",
    ),
)
