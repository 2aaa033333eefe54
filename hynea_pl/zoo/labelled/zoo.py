"""The base zoo of a labelled-image profile (the MNIST digits' or a folder's): its components in the registry
(:mod:`hynea_pl.zoo.registry`), built and gated together as the bundle ``zoo``, and :class:`Zoo`, a built profile's
models.

Members: ``sut`` and ``embedder`` (:class:`~hynea_pl.zoo.labelled.classifier.SmallCNN`), ``autoencoder`` (diffusers
``AutoencoderKL``), ``ldm`` (a class-conditional latent diffusion generator on the autoencoder's latents) and the
validity oracle's members (:data:`~hynea_pl.zoo.labelled.oracle.ORACLE_NAMES`). Their training configs are the
profile's fields (:mod:`hynea_pl.zoo.labelled.config`). The bundle's gates (:mod:`hynea_pl.zoo.labelled.gates`):
the SUT's accuracy on held-out images, on their reconstructions and on generated images, each oracle member's
accuracy, the verdict's ceiling and the build time of the whole base zoo (a budget).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from diffusers import AutoencoderKL
from torch import nn

from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT
from hynea_pl.zoo.labelled import train
from hynea_pl.zoo.labelled.classifier import SmallCNN, load_classifier
from hynea_pl.zoo.labelled.config import GateConfig, ZooProfile
from hynea_pl.zoo.labelled.embedder import ImageEmbedder, load_embedder
from hynea_pl.zoo.labelled.gates import (
    gate_advice, generate_images, measure_ceiling_gates, measure_colour_gates, measure_model_gates,
    measure_oracle_gates,
)
from hynea_pl.zoo.labelled.oracle import ORACLE_NAMES, ORACLE_ROLES, load_oracle
from hynea_pl.zoo.labelled.realism import REALISM_K, REALISM_QUANTILE
from hynea_pl.zoo.profiles import get_profile
from hynea_pl.zoo.quality import Gate
from hynea_pl.zoo.registry import BASE_ZOO, BuildContext, Component, build_component, component_paths, load_component

#: The base zoo's members, in build order.
COMPONENTS = ("sut", "embedder", "autoencoder", "ldm", *ORACLE_NAMES)

#: The digits each member trains on (:data:`~hynea_pl.zoo.splits.SPLITS`): the SUT its own; what a method may use
#: (the generator, the steering member) the method's; the judges and the realism test's embedder the judges'.
TRAINING_SPLITS: dict[str, str] = {
    "sut": "sut", "embedder": "judges", "autoencoder": "method", "ldm": "method",
    **{name: "method" for name in ORACLE_ROLES["steering"]}, **{name: "judges" for name in ORACLE_ROLES["judges"]},
}


@dataclass(frozen=True)
class Zoo:
    """A built zoo profile: the cache folder of each component and the measured quality."""

    profile: ZooProfile
    entries: dict[str, Path]
    manifest_dir: Path

    @cached_property
    def quality(self) -> dict:
        return json.loads((self.manifest_dir / "quality.json").read_text())

    def sut(self) -> SmallCNN:
        return load_classifier(self.entries["sut"])

    def embedder(self) -> ImageEmbedder:
        """The metric embedder: images in [0, 1] -> penultimate features of the embedder network."""
        return load_embedder(self.entries["embedder"])

    def generator(self, **settings):
        """The frozen zoo LDM as a :class:`~hynea_pl.generators.LatentDiffusionGenerator` with the profile's
        default sampler settings (overridable)."""
        sampler = self.profile.sampler
        defaults = {"num_inference_steps": sampler.num_inference_steps,
                    "guidance_scale": sampler.guidance_scale, "eta": sampler.eta}
        return load_generator(self.entries["ldm"], **{**defaults, **settings})

    def oracle(self, name: str) -> nn.Module:
        """A frozen validity-oracle member in eval mode: RAW images ``(B, 1, 32, 32)`` in [0, 1] -> logits
        ``(B, 10)`` (the normalisation is inside)."""
        if name not in ORACLE_NAMES:
            raise ValueError(f"unknown zoo oracle {name!r}; choose one of {list(ORACLE_NAMES)}")
        return load_oracle(self.entries[name])

    def panel_args(self, names: list[str], role: str) -> dict[str, Any]:
        """The :class:`~hynea_pl.suts.EnsembleClassifierSUT` arguments of the oracle members ``names`` of ``role``:
        the members, their names and, for the judges, the profile's vote
        (:class:`~hynea_pl.zoo.labelled.config.VoteConfig`) and their "not a digit" output (the steering member
        decides alone, by its most probable class)."""
        members = [self.oracle(name) for name in names]
        not_a_class = {member.not_a_class for member in members}
        if len(not_a_class) > 1:
            raise ValueError(f"oracle members {names} do not share a 'not a digit' output")
        judges = role == "judges"
        return {"members": [ClassifierSUT(member) for member in members], "names": list(names),
                "threshold": self.profile.vote.threshold if judges else None,
                "not_a_class": not_a_class.pop() if judges else None}

    def extra(self, name: str) -> Any:
        """An on-demand component of this profile (e.g. ``"stylegan"``), built on first use; see
        :mod:`hynea_pl.zoo.registry`."""
        return load_component(self.profile, name)

    @staticmethod
    def oracle_names() -> dict[str, list[str]]:
        """The oracle members by role (``steering``, ``judges``): the judges never steer a search."""
        return {role: list(names) for role, names in ORACLE_ROLES.items()}


def load_generator(entry: Path, **settings):
    """The frozen LDM of an ``ldm`` entry as a :class:`~hynea_pl.generators.LatentDiffusionGenerator` (``settings``:
    its sampler settings; :meth:`Zoo.generator` gives the profile's)."""
    from hynea_pl.generators import LatentDiffusionGenerator

    return LatentDiffusionGenerator.from_pretrained(entry, **settings)


def entry_paths(profile: ZooProfile) -> tuple[dict[str, Path], Path]:
    """Cache folders of each component and of the profile's manifest, keyed by their training configs."""
    entries = {name: component_paths(profile, name)[0] for name in COMPONENTS}
    return entries, component_paths(profile, BASE_ZOO)[1]


def build_zoo(profile: ZooProfile | str = "full", verbose: bool = True, released: bool = True) -> Zoo:
    """Build every missing component of ``profile`` (showing each one's training progress), then measure and
    store its quality gates; ``verbose`` prints the quality table after a build (it is always printed when a
    gate is missed). Nothing is printed when the profile is already cached. The released profile (the package's
    weights, :mod:`hynea_pl.zoo.released`) is installed instead of trained unless ``released`` is ``False``.

    Raises :class:`~hynea_pl.zoo.quality.ZooQualityError` when a model-quality gate is missed, leaving no manifest,
    so the zoo is never loaded as valid. The build time is a budget: measured, stored and shown (``over budget``
    plus a one-line warning when missed), never fatal.
    """
    profile = get_profile(profile) if isinstance(profile, str) else profile
    built = build_component(profile, BASE_ZOO, verbose=verbose, released=released)
    return Zoo(profile, built.entries, built.manifest)


def load_zoo(profile: ZooProfile | str = "full") -> Zoo:
    """The zoo of ``profile``; the first use builds it, showing each component's progress and the quality table."""
    return build_zoo(profile, verbose=True)


# -------------------------------------------------------------------------------------- the registry's view
def measure_base_zoo(gates: GateConfig, entry: None, context: BuildContext, out: Path) -> list[Gate]:
    """The bundle's gates (:mod:`hynea_pl.zoo.labelled.gates`): the SUT on held-out, reconstructed and generated
    digits (grid saved to ``out/samples.png``), then the oracle members and the judges' unanimous vote."""
    zoo = Zoo(context.profile, context.deps, out)
    samples = generate_images(zoo.generator(), gates.generated_per_class, gates.sample_seed,
                              context.profile.data.num_classes)
    held_out = context.data.sut  # every split carries the same held-out test digits, which none trains on
    result = measure_model_gates(gates, zoo.sut(), AutoencoderKL.from_pretrained(zoo.entries["autoencoder"]),
                                 samples, held_out, out)
    result += measure_colour_gates(gates, samples[0], held_out)
    oracles = {name: zoo.oracle(name) for name in ORACLE_NAMES}
    panel = EnsembleClassifierSUT(**zoo.panel_args(ORACLE_ROLES["judges"], "judges"))
    result += measure_oracle_gates(gates, oracles, panel, samples, held_out)
    # the zoo's realism test (ZooTypicality's reference, features and defaults) on the models being gated
    realism = TypicalityTest(held_out.test_images, zoo.embedder(), k=REALISM_K, quantile=REALISM_QUANTILE)
    return result + measure_ceiling_gates(gates, panel, realism, zoo.sut(), held_out)


def _oracle_config(name: str) -> Callable[[ZooProfile], Any]:
    def config(profile: ZooProfile) -> Any:
        if sorted(profile.oracles) != sorted(ORACLE_NAMES):
            raise ValueError(f"zoo profile {profile.name!r} has oracle configs {sorted(profile.oracles)}, "
                             f"expected {', '.join(ORACLE_NAMES)}")
        return profile.oracles[name]

    return config


def _member(name: str, config: Callable[[ZooProfile], Any], train_fn: Callable[[Any, BuildContext, Path], object],
            load: Callable[[Path], Any], uri_target: str = "", depends: tuple[str, ...] = (),
            description: str = "") -> Component:
    return Component(name=name, train_configs=config, gate_configs=None, train=train_fn, measure=None, load=load,
                     depends=depends, uri_target=uri_target, part_of=BASE_ZOO, description=description)


# The trainers are looked up in :mod:`hynea_pl.zoo.labelled.train` at build time (tests replace them there).
ZOO_COMPONENTS: tuple[Component, ...] = (
    _member("sut", lambda p: p.sut,
            lambda cfg, ctx, out: train.train_classifier(cfg, ctx.data, TRAINING_SPLITS["sut"], out, "sut",
                                                           ctx.profile.data),
            load_classifier, "model.safetensors", description="the system under test: SmallCNN"),
    _member("embedder", lambda p: p.embedder,
            lambda cfg, ctx, out: train.train_classifier(cfg, ctx.data, TRAINING_SPLITS["embedder"], out, "embedder",
                                                           ctx.profile.data),
            load_embedder, "model.safetensors", description="the metric embedder: another SmallCNN's features"),
    _member("autoencoder", lambda p: p.autoencoder,
            lambda cfg, ctx, out: train.train_autoencoder(cfg, ctx.data, TRAINING_SPLITS["autoencoder"], out,
                                                            ctx.profile.data),
            AutoencoderKL.from_pretrained, description="AutoencoderKL, 1x32x32 <-> 4x8x8 (diffusers folder)"),
    _member("ldm", lambda p: p.denoiser,
            lambda cfg, ctx, out: train.train_denoiser(cfg, ctx.data, TRAINING_SPLITS["ldm"], ctx.deps["autoencoder"],
                                                       out, ctx.profile.data),
            load_generator, depends=("autoencoder",),
            description="class-conditional LDM on the autoencoder's latents (LatentDiffusionGenerator folder)"),
    *(_member(name, _oracle_config(name),
              lambda cfg, ctx, out, name=name: train.train_oracle(cfg, ctx.data, TRAINING_SPLITS[name], out, name,
                                                                  ctx.profile.data),
              load_oracle, "model.safetensors",
              description=f"validity-oracle member ({name})")
      for name in ORACLE_NAMES),
    Component(name=BASE_ZOO, train_configs=None, gate_configs=lambda p: p.gates, train=None,
              measure=measure_base_zoo, load=None, depends=COMPONENTS, gate_inputs=lambda p: (p.sampler, p.vote),
              advice=gate_advice,
              description="the MNIST base zoo: its members gated together"),
)

__all__ = ["COMPONENTS", "ZOO_COMPONENTS", "Zoo", "build_zoo", "entry_paths", "load_generator", "load_zoo",
           "measure_base_zoo"]
