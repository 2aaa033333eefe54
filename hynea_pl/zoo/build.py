"""Build (what is missing of) a zoo profile and load it from the cache."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from diffusers import AutoencoderKL
from safetensors.torch import load_file
from torch import nn

from hynea_pl.zoo import train
from hynea_pl.zoo.cache import atomic_entry, config_key, is_complete, zoo_dir
from hynea_pl.zoo.classifier import DigitCNN
from hynea_pl.zoo.data import DigitSplit, load_digits
from hynea_pl.zoo.embedder import DigitEmbedder
from hynea_pl.zoo.oracle import ORACLE_NAMES, ORACLE_ROLES, load_oracle
from hynea_pl.zoo.profiles import ZooProfile, get_profile
from hynea_pl.zoo.quality import (
    Gate, ZooQualityError, generate_digits, measure_model_gates, measure_oracle_gates, quality_table,
)

COMPONENTS = ("sut", "embedder", "autoencoder", "ldm", *ORACLE_NAMES)
#: Components saved as one state-dict file (``zoo://<profile>/<name>`` resolves to their ``model.safetensors``).
STATE_DICT_COMPONENTS = ("sut", "embedder", *ORACLE_NAMES)


def load_classifier(entry: Path) -> DigitCNN:
    """A frozen DigitCNN from a zoo classifier entry (``config.json`` + ``model.safetensors``)."""
    config = json.loads((entry / "config.json").read_text())
    model = DigitCNN(**config["init_args"])
    model.load_state_dict(load_file(str(entry / "model.safetensors")))
    return model.eval().requires_grad_(False)


@dataclass(frozen=True)
class Zoo:
    """A built zoo profile: the cache folder of each component and the measured quality."""

    profile: ZooProfile
    entries: dict[str, Path]
    manifest_dir: Path

    @cached_property
    def quality(self) -> dict:
        return json.loads((self.manifest_dir / "quality.json").read_text())

    def sut(self) -> DigitCNN:
        return load_classifier(self.entries["sut"])

    def embedder(self) -> DigitEmbedder:
        """The metric embedder: images in [0, 1] -> penultimate features of the embedder network."""
        return DigitEmbedder(load_classifier(self.entries["embedder"]))

    def generator(self, **settings):
        """The frozen zoo LDM as a :class:`~hynea_pl.generators.LatentDiffusionGenerator` with the profile's
        default sampler settings (overridable)."""
        from hynea_pl.generators import LatentDiffusionGenerator

        sampler = self.profile.sampler
        defaults = {"num_inference_steps": sampler.num_inference_steps,
                    "guidance_scale": sampler.guidance_scale, "eta": sampler.eta}
        return LatentDiffusionGenerator.from_pretrained(self.entries["ldm"], **{**defaults, **settings})

    def oracle(self, name: str) -> nn.Module:
        """A frozen validity-oracle member in eval mode: RAW images ``(B, 1, 32, 32)`` in [0, 1] -> logits
        ``(B, 10)`` (the normalisation is inside)."""
        if name not in ORACLE_NAMES:
            raise ValueError(f"unknown zoo oracle {name!r}; choose one of {list(ORACLE_NAMES)}")
        return load_oracle(self.entries[name])

    def extra(self, name: str):
        """An on-demand component of this profile (e.g. ``"stylegan"``), built on first use; see
        :mod:`hynea_pl.zoo.extras`."""
        from hynea_pl.zoo.extras import load_extra

        return load_extra(self.profile, name)

    @staticmethod
    def oracle_names() -> dict[str, list[str]]:
        """The oracle members by role (``steering``, ``judges``): the judges never steer a search."""
        return {role: list(names) for role, names in ORACLE_ROLES.items()}


def entry_paths(profile: ZooProfile) -> tuple[dict[str, Path], Path]:
    """Cache folders of each component and of the profile's manifest, keyed by their training configs."""
    keys = {
        "sut": config_key("sut", profile.data, profile.sut),
        "embedder": config_key("embedder", profile.data, profile.embedder),
        "autoencoder": config_key("autoencoder", profile.data, profile.autoencoder),
    }
    keys["ldm"] = config_key("ldm", profile.data, profile.denoiser, keys["autoencoder"])
    if sorted(profile.oracles) != sorted(ORACLE_NAMES):
        raise ValueError(f"zoo profile {profile.name!r} has oracle configs {sorted(profile.oracles)}, "
                         f"expected {', '.join(ORACLE_NAMES)}")
    for name, cfg in profile.oracles.items():
        keys[name] = config_key(name, profile.data, cfg)
    root = zoo_dir()
    entries = {name: root / f"{name}-{key}" for name, key in keys.items()}
    manifest = root / f"{profile.name}-{config_key(keys, profile.sampler, profile.gates)}"
    return entries, manifest


def _timed_entry(path: Path, build: Callable[[Path], object]) -> None:
    with atomic_entry(path) as staging:
        start = time.perf_counter()
        build(staging)
        (staging / "build.json").write_text(json.dumps({"build_s": time.perf_counter() - start}))


def build_zoo(profile: ZooProfile | str = "full", verbose: bool = True) -> Zoo:
    """Build every missing component of ``profile`` (showing each one's training progress), then measure and
    store its quality gates; ``verbose`` prints the quality table after a build (it is always printed when a
    gate is missed). Nothing is printed when the profile is already cached.

    Raises :class:`ZooQualityError` when a model-quality gate is missed, leaving no manifest, so the zoo is never
    loaded as valid. The build time is a budget: measured, stored and shown (``over budget`` plus a one-line
    warning when missed), never fatal.
    """
    if isinstance(profile, str):
        profile = get_profile(profile)
    entries, manifest = entry_paths(profile)
    if is_complete(manifest) and all(is_complete(p) for p in entries.values()):
        return Zoo(profile, entries, manifest)

    data_cfg = profile.data
    data: DigitSplit = load_digits(data_cfg.n_test, data_cfg.split_seed, data_cfg.n_train)
    builders: dict[str, Callable[[Path], object]] = {
        "sut": lambda out: train.train_classifier(profile.sut, data, out, "sut"),
        "embedder": lambda out: train.train_classifier(profile.embedder, data, out, "embedder"),
        "autoencoder": lambda out: train.train_autoencoder(profile.autoencoder, data, out),
        "ldm": lambda out: train.train_denoiser(profile.denoiser, data, entries["autoencoder"], out),
    }
    for name, cfg in profile.oracles.items():
        builders[name] = lambda out, cfg=cfg, name=name: train.train_oracle(cfg, data, out, name)
    for name in COMPONENTS:
        if not is_complete(entries[name]):
            _timed_entry(entries[name], builders[name])

    zoo = Zoo(profile, entries, manifest)
    with atomic_entry(manifest) as staging:
        start = time.perf_counter()
        samples = generate_digits(zoo.generator(), profile.gates.generated_per_class, profile.gates.sample_seed)
        gates = measure_model_gates(
            profile.gates, zoo.sut(), AutoencoderKL.from_pretrained(entries["autoencoder"]), samples, data, staging,
        )
        oracles = {name: zoo.oracle(name) for name in ORACLE_NAMES}
        gates += measure_oracle_gates(profile.gates, oracles, ORACLE_ROLES["judges"], samples, data)
        build_s = sum(json.loads((entries[n] / "build.json").read_text())["build_s"] for n in COMPONENTS)
        build_s += time.perf_counter() - start
        time_gate = Gate("build_time_s", build_s, profile.gates.max_build_s, higher_is_better=False, fatal=False)
        quality = {"profile": profile.name, "gates": [g.as_dict() for g in (*gates, time_gate)],
                   "entries": {k: str(v) for k, v in entries.items()}}
        (staging / "quality.json").write_text(json.dumps(quality, indent=2))
        failed = [g.name for g in gates if not g.passed]
        if verbose or failed:
            train.console.print(quality_table(profile.name, quality["gates"]))
        if failed:
            raise ZooQualityError(f"zoo profile {profile.name!r} missed its quality gates: {', '.join(failed)}")
    if not time_gate.passed:
        train.console.print(
            f"[yellow]zoo: warning:[/] profile {profile.name!r} built in {build_s:.0f} s, over its "
            f"{time_gate.threshold:.0f} s budget (the models passed their gates and are cached)",
            soft_wrap=True,
        )
    return zoo


def load_zoo(profile: ZooProfile | str = "full") -> Zoo:
    """The zoo of ``profile``; the first use builds it, showing each component's progress and the quality table."""
    return build_zoo(profile, verbose=True)


def resolve_zoo_uri(uri: str) -> Path:
    """``zoo://<profile>/<component>`` -> a local path (building the zoo if needed).

    Components: ``sut`` / ``embedder`` / the oracle members (``steer-cnn``, ``oracle-1``, ...; state-dict files),
    ``ldm`` (generator folder), ``autoencoder`` (folder); an extra (e.g. ``stylegan``, :mod:`hynea_pl.zoo.extras`) is built
    on first use and resolves to its entry.
    """
    from hynea_pl.zoo.extras import extra_names, resolve_extra

    profile, _, component = uri.removeprefix("zoo://").partition("/")
    if component in extra_names():
        return resolve_extra(profile, component)
    if component not in COMPONENTS:
        raise ValueError(f"unknown zoo component in {uri!r}; choose one of {list(COMPONENTS) + extra_names()}")
    entry = load_zoo(profile).entries[component]
    return entry / "model.safetensors" if component in STATE_DICT_COMPONENTS else entry
