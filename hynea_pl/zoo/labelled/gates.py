"""Quality gates of a base zoo: measured on the profile's held-out images (the 10,000 MNIST test digits for the
built-in profiles) and on generated images (the base zoo's ``measure``, :mod:`hynea_pl.zoo.labelled.zoo`)."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKL
from torch import nn
from torchvision.utils import save_image

from hynea_pl.evaluation.ceiling import read_real_images
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts.ensemble import EnsembleClassifierSUT
from hynea_pl.verdicts import VERDICT_CEILING
from hynea_pl.zoo.labelled.autoencoder import reconstruct
from hynea_pl.zoo.labelled.classifier import SmallCNN, accuracy, normalize
from hynea_pl.zoo.labelled.config import GateConfig
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.splits import ImageSplit


@torch.no_grad()
def generate_images(generator, per_class: int, seed: int, num_classes: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` images of each of ``num_classes`` classes from one seeded noise batch: images
    ``(num_classes * per_class, C, S, S)`` and their conditioning labels, class-major."""
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    noise = torch.randn((len(labels), *generator.latent_shape), generator=torch.Generator().manual_seed(seed))
    return generator.sample(noise, labels), labels


def measure_model_gates(gates: GateConfig, sut: SmallCNN, vae: AutoencoderKL,
                        samples: tuple[torch.Tensor, torch.Tensor], data: ImageSplit, out: Path) -> list[Gate]:
    """SUT accuracy on held-out digits, on their reconstructions and on the generated ``samples`` (images, labels
    from :func:`generate_images`; grid saved to ``out/samples.png``)."""
    images, labels = samples
    save_image(images, out / "samples.png", nrow=gates.generated_per_class, padding=1)
    return [
        Gate("sut_accuracy", accuracy(sut, data.test_images, data.test_labels), gates.sut_accuracy),
        Gate("reconstruction_accuracy", accuracy(sut, reconstruct(vae, data.test_images), data.test_labels),
             gates.reconstruction_accuracy),
        Gate("generated_accuracy", accuracy(sut, images, labels), gates.generated_accuracy),
    ]


def _pixel_colours(images: torch.Tensor) -> torch.Tensor:
    """Every pixel's colour of ``images (N, 3, H, W)``: ``(N * H * W, 3)``."""
    return images.permute(0, 2, 3, 1).reshape(-1, 3).double()


def colour_fidelity(generated: torch.Tensor, real: torch.Tensor) -> float:
    """How well ``generated`` images keep the colours of ``real`` ones (both ``(N, 3, H, W)`` in [0, 1]): along each
    principal axis of the real pixels' colours (the eigenvectors of their 3 x 3 covariance), the generated pixels'
    variance over the real pixels', taken as the smaller over the larger; the least of the three. 1 when the
    generated colours spread like the real ones; near 0 when they lost a direction of colour (grey samples of a
    colour domain, or red and blue drawn alike: every hue on one green-magenta line). Axes along which the real
    colours do not vary (below 1e-3 of the widest) are left out."""
    real_cov = torch.cov(_pixel_colours(real).T)
    generated_cov = torch.cov(_pixel_colours(generated).T)
    spread, axes = torch.linalg.eigh(real_cov)
    ratios = []
    for value, axis in zip(spread, axes.T):
        if value < 1e-3 * spread.max():
            continue
        ratio = float(axis @ generated_cov @ axis / value)
        ratios.append(min(ratio, 1 / ratio) if ratio > 0 else 0.0)
    return min(ratios) if ratios else 1.0


def measure_colour_gates(gates: GateConfig, generated: torch.Tensor, data: ImageSplit) -> list[Gate]:
    """``colour_fidelity`` of the generated images against the held-out ones, for colour images only (its
    threshold: the gates' ``colour_fidelity`` where they have one, else recorded only)."""
    if generated.shape[1] != 3:
        return []
    return [Gate("colour_fidelity", colour_fidelity(generated, data.test_images[:2000].float()),
                 getattr(gates, "colour_fidelity", None))]


@torch.no_grad()
def probabilities(model: nn.Module, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Softmax ``(N, 10)`` of a model on RAW images in [0, 1] (an oracle member normalises them itself)."""
    return torch.cat([model(images[i : i + batch_size]).softmax(-1) for i in range(0, len(images), batch_size)])


def _hit_rate(probs: torch.Tensor, labels: torch.Tensor) -> float:
    return (probs.argmax(-1) == labels).sum().item() / len(labels)


def measure_oracle_gates(gates: GateConfig, oracles: dict[str, nn.Module], panel: EnsembleClassifierSUT,
                         samples: tuple[torch.Tensor, torch.Tensor], data: ImageSplit) -> list[Gate]:
    """Each oracle member's accuracy on the held-out digits (gated by ``oracle_accuracy``) and on the generated
    ``samples`` against their class (recorded), then the judges' ``panel`` on both (recorded: the fraction of
    digits their vote reads as their class, as a verdict needs them)."""
    images, labels = samples
    result = []
    for name, oracle in oracles.items():
        held_out, generated = probabilities(oracle, data.test_images), probabilities(oracle, images)
        result.append(Gate(f"{name}_accuracy", _hit_rate(held_out, data.test_labels), gates.oracle_accuracy))
        result.append(Gate(f"{name}_generated_accuracy", _hit_rate(generated, labels), None))
    for suffix, shown, truth in (("", data.test_images, data.test_labels), ("_generated", images, labels)):
        reads = panel.panel_readings(shown)[0] == truth
        result.append(Gate(f"judges_vote{suffix}_accuracy", reads.double().mean().item(), None))
    return result


def measure_ceiling_gates(gates: GateConfig, panel: EnsembleClassifierSUT, realism: TypicalityTest,
                          sut: SmallCNN, data: ImageSplit) -> list[Gate]:
    """The verdict's ceiling (:mod:`hynea_pl.evaluation.ceiling`) on the held-out test digits of ``data``, which no
    zoo model trains on and which are ``realism``'s reference (each judged left out of it): the fraction the verdict
    (the judges' ``panel`` reads the digit's class; ``realism`` too where it decides) calls valid, gated by
    ``verdict_ceiling``; the same among the SUT's mistakes on them (its natural failures: how often the verdict
    recognises a true failure), recorded."""
    readings = read_real_images(panel, realism, lambda x: sut(normalize(x)), data.test_images, data.test_labels,
                                are_reference=True)
    on_all, on_errors = readings.rates(), readings.rates(~readings.sut_correct)
    return [
        Gate(VERDICT_CEILING, on_all["valid"], gates.verdict_ceiling),
        Gate("verdict_ceiling_sut_errors", on_errors["valid"], None),
    ]


def gate_advice(name: str) -> str:
    """What to change when the base zoo's gate ``name`` is missed (a ``--set`` of ``zoo build``)."""
    if name == "sut_accuracy":
        return "the demo SUT learns too little: raise sut.max_steps"
    if name == "reconstruction_accuracy":
        return "the autoencoder loses the class: raise autoencoder.max_steps or autoencoder.latent_channels"
    if name == "generated_accuracy":
        return "the LDM's images do not show their class: raise denoiser.max_steps"
    if name == "colour_fidelity":
        return ("the generated images lose a direction of the images' colours: give the autoencoder more latent "
                "channels (autoencoder.latent_channels=8) or steps (autoencoder.max_steps)")
    if name == "verdict_ceiling":
        return ("the judges and the realism test reject real held-out images: train the judges longer "
                "(oracles.NAME.max_steps) or lower gates.verdict_ceiling")
    if name.endswith("_accuracy"):
        member = name.removesuffix("_accuracy")
        return f"judge {member} learns too little: raise oracles.{member}.max_steps"
    return "see docs/zoo.md#gates"
