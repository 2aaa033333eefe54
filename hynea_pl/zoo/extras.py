"""On-demand zoo components ("extras"): trained only when first used, never by the base zoo (the MNIST demo).

A base zoo profile (:func:`hynea_pl.zoo.build.build_zoo`) builds the SUT, embedder, autoencoder, LDM and oracle.
An *extra* is any further component (e.g. ``stylegan``) that only some configs need. It is built on first use of
``zoo://<profile>/<name>``, of :meth:`Zoo.extra <hynea_pl.zoo.build.Zoo.extra>` / :func:`load_extra`, or by
``python -m hynea_pl zoo build`` (which builds the extras too unless told ``--extras none``).

Registering a component (in its own module, at import time)::

    from hynea_pl.zoo.extras import ExtraComponent, register_extra

    register_extra(ExtraComponent(
        name="stylegan",
        train_configs={"full": FullConfig(), "tiny": TinyConfig()},   # frozen dataclasses, one per profile
        gate_configs={"full": Gates(), "tiny": Gates(...)},           # frozen dataclass with ``max_build_s``
        train=train_fn,        # (train_cfg, ExtraContext, staging folder) -> None: writes the weights
        measure=measure_fn,    # (gate_cfg, entry folder, ExtraContext, staging folder) -> list[Gate]
        load=load_fn,          # (entry folder) -> the loaded, frozen component
        depends=("sut",),      # base components or other extras whose cache keys enter this one's key
        gated_by=(),           # other extras its gates use (built before measuring; part of the gates' key only)
        uri_target="",         # what ``zoo://<profile>/<name>`` resolves to inside the entry ("" = the folder)
    ))

``train`` and ``measure`` get an :class:`ExtraContext`: the profile, the built entry folder of each of
``depends``, the profile's digit split and, only when asked for, the base zoo (``context.zoo`` builds it on first
access: a component that needs no base model, like the digit-scene components, never builds the MNIST demo's zoo).

and name its module in :data:`BUILTIN_EXTRAS` (``name -> module``) so that it is imported when first looked up.

Cache layout (the helpers of :mod:`hynea_pl.zoo.cache`, atomic and content-addressed like the base zoo):

- ``zoo/<name>-<key>/``: the trained component; key = hash of (name, the profile's data config, the train config,
  the entry names of its ``depends``); ``build.json`` holds its training seconds. An extra named in ``depends``
  is built (and gated) first.
- ``zoo/<profile>-<name>-<key>/quality.json``: its gates (key = hash of the entry name, the gate config and the
  base zoo's manifest name), printed with :func:`hynea_pl.zoo.quality.quality_table`, plus whatever ``measure``
  writes (e.g. ``samples.png``). The build time (training + gates) is a budget gate (never fatal); a missed
  fatal gate raises :class:`~hynea_pl.zoo.quality.ZooQualityError` and leaves no quality manifest, so the extra
  is never loaded as valid (the trained entry stays cached).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hynea_pl.zoo.cache import atomic_entry, config_key, is_complete, zoo_dir
from hynea_pl.zoo.profiles import ZooProfile, get_profile
from hynea_pl.zoo.quality import Gate, ZooQualityError, quality_table

#: ``name -> module`` that registers the extra on import (looked up lazily: the base zoo never imports them).
BUILTIN_EXTRAS: dict[str, str] = {
    "stylegan": "hynea_pl.zoo.stylegan_build",
    # digit scenes (issue 17): the unconditional scene LDM, the multi-label attribute SUT and its oracle, the detector
    "scene_autoencoder": "hynea_pl.zoo.scene_ldm",
    "scene_ldm": "hynea_pl.zoo.scene_ldm",
    "attribute_sut": "hynea_pl.zoo.scene_attributes",
    "attribute_oracle": "hynea_pl.zoo.scene_attributes",
    "detector_sut": "hynea_pl.zoo.scene_detector",
}

_REGISTRY: dict[str, "ExtraComponent"] = {}


@dataclass(frozen=True)
class ExtraComponent:
    """An on-demand zoo component: per-profile configs, how to train, gate and load it (see the module doc)."""

    name: str
    train_configs: Mapping[str, Any]
    gate_configs: Mapping[str, Any]
    train: Callable[[Any, "ExtraContext", Path], None]
    measure: Callable[[Any, Path, "ExtraContext", Path], list[Gate]]
    load: Callable[[Path], Any]
    depends: tuple[str, ...] = ()
    uri_target: str = ""
    description: str = field(default="", compare=False)
    #: whether ``measure`` uses the base zoo's models (then the base zoo's manifest is part of the gates' key)
    base_gated: bool = True
    #: other extras that ``measure`` uses (e.g. the scene LDM's gates score its scenes with the scene SUTs): built
    #: before measuring, in ``context.deps``, and their entries are part of the gates' key, not of the entry's
    gated_by: tuple[str, ...] = ()


class ExtraContext:
    """What an extra's ``train`` / ``measure`` may use: ``profile``, ``deps`` (name -> built entry folder of each
    of its ``depends``), ``data`` (the profile's digit split, loaded on first access) and ``zoo`` (the base zoo,
    built on first access)."""

    def __init__(self, profile: ZooProfile, deps: Mapping[str, Path]) -> None:
        self.profile = profile
        self.deps = dict(deps)

    @cached_property
    def data(self):
        from hynea_pl.zoo.data import load_digits

        cfg = self.profile.data
        return load_digits(cfg.n_test, cfg.split_seed, cfg.n_train)

    @cached_property
    def zoo(self):
        from hynea_pl.zoo.build import build_zoo

        return build_zoo(self.profile, verbose=True)


@dataclass(frozen=True)
class ExtraEntry:
    """A built extra: its trained entry folder and its quality manifest folder."""

    name: str
    profile: str
    entry: Path
    manifest: Path

    @property
    def quality(self) -> dict:
        return json.loads((self.manifest / "quality.json").read_text())


def register_extra(component: ExtraComponent) -> None:
    """Add (or replace) an extra component; a name of a base component is refused."""
    from hynea_pl.zoo.build import COMPONENTS

    if component.name in COMPONENTS:
        raise ValueError(f"zoo extra {component.name!r} clashes with a base zoo component")
    _REGISTRY[component.name] = component


def extra_names() -> list[str]:
    """The names of all known extras (registered or built in)."""
    return sorted({*_REGISTRY, *BUILTIN_EXTRAS})


def get_extra(name: str) -> ExtraComponent:
    """The registered extra ``name`` (importing its built-in module on first use); one-line error otherwise."""
    if name not in _REGISTRY and name in BUILTIN_EXTRAS:
        importlib.import_module(BUILTIN_EXTRAS[name])
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown zoo extra {name!r}; choose one of {extra_names()}") from None


def _profile_config(mapping: Mapping[str, Any], name: str, profile: ZooProfile, what: str) -> Any:
    try:
        return mapping[profile.name]
    except KeyError:
        raise ValueError(f"zoo extra {name!r} has no {what} for profile {profile.name!r} "
                         f"(it has {sorted(mapping)})") from None


def extra_paths(profile: ZooProfile | str, name: str) -> tuple[Path, Path]:
    """The cache folders ``(entry, quality manifest)`` of extra ``name`` in ``profile`` (nothing is built)."""
    from hynea_pl.zoo.build import entry_paths

    profile = get_profile(profile) if isinstance(profile, str) else profile
    component = get_extra(name)
    train_cfg = _profile_config(component.train_configs, name, profile, "train config")
    gate_cfg = _profile_config(component.gate_configs, name, profile, "gate config")
    base_entries, base_manifest = entry_paths(profile)
    deps = {dep: (base_entries[dep] if dep in base_entries else extra_paths(profile, dep)[0]).name
            for dep in component.depends}
    entry = zoo_dir() / f"{name}-{config_key(name, profile.data, train_cfg, deps)}"
    # the manifest's key names the base zoo's manifest only for an extra gated against base models (stylegan):
    # a scene component's gates do not change with the MNIST demo's zoo
    base = base_manifest.name if component.base_gated else None
    gating = [extra_paths(profile, other)[0].name for other in component.gated_by]
    manifest = zoo_dir() / f"{profile.name}-{name}-{config_key(entry.name, gate_cfg, base, *gating)}"
    return entry, manifest


def build_extra(profile: ZooProfile | str, name: str, verbose: bool = True) -> ExtraEntry:
    """Build what is missing of extra ``name`` (and of the base zoo it needs), then measure and store its gates.

    Prints the quality table after a build when ``verbose`` (always when a gate is missed); nothing when cached.
    Raises :class:`ZooQualityError` on a missed fatal gate.
    """
    from hynea_pl.zoo import train
    from hynea_pl.zoo.build import COMPONENTS, _timed_entry, build_zoo

    profile = get_profile(profile) if isinstance(profile, str) else profile
    component = get_extra(name)
    entry, manifest = extra_paths(profile, name)
    if is_complete(entry) and is_complete(manifest):
        return ExtraEntry(name, profile.name, entry, manifest)
    deps: dict[str, Path] = {}
    for dep in component.depends:
        if dep in COMPONENTS:
            deps[dep] = build_zoo(profile, verbose=verbose).entries[dep]
        else:
            deps[dep] = build_extra(profile, dep, verbose=verbose).entry
    context = ExtraContext(profile, deps)
    train_cfg = component.train_configs[profile.name]
    gate_cfg = component.gate_configs[profile.name]
    if not is_complete(entry):
        _timed_entry(entry, lambda out: component.train(train_cfg, context, out))
    for other in component.gated_by:
        context.deps[other] = build_extra(profile, other, verbose=verbose).entry
    with atomic_entry(manifest) as staging:
        start = time.perf_counter()
        gates = component.measure(gate_cfg, entry, context, staging)
        build_s = json.loads((entry / "build.json").read_text())["build_s"] + time.perf_counter() - start
        time_gate = Gate("build_time_s", build_s, getattr(gate_cfg, "max_build_s", None),
                         higher_is_better=False, fatal=False)
        quality = {"profile": profile.name, "extra": name, "entry": str(entry),
                   "gates": [g.as_dict() for g in (*gates, time_gate)]}
        (staging / "quality.json").write_text(json.dumps(quality, indent=2))
        failed = [g.name for g in gates if not g.passed]
        title = f"{profile.name}/{name}"
        if verbose or failed:
            train.console.print(quality_table(title, quality["gates"]))
        if failed:
            raise ZooQualityError(f"zoo extra {title!r} missed its quality gates: {', '.join(failed)}")
    if not time_gate.passed:
        train.console.print(
            f"[yellow]zoo: warning:[/] extra {title!r} built in {build_s:.0f} s, over its "
            f"{time_gate.threshold:.0f} s budget (it passed its gates and is cached)", soft_wrap=True,
        )
    return ExtraEntry(name, profile.name, entry, manifest)


def load_extra(profile: ZooProfile | str, name: str) -> Any:
    """The loaded extra ``name`` of ``profile`` (built on first use, showing its progress and quality table)."""
    built = build_extra(profile, name, verbose=True)
    return get_extra(name).load(built.entry)


def resolve_extra(profile: str, name: str) -> Path:
    """``zoo://<profile>/<name>`` for an extra: the built entry folder (or its ``uri_target`` inside it)."""
    built = build_extra(profile, name, verbose=True)
    target = get_extra(name).uri_target
    return built.entry / target if target else built.entry


__all__ = [
    "BUILTIN_EXTRAS", "ExtraComponent", "ExtraContext", "ExtraEntry", "build_extra", "extra_names", "extra_paths", "get_extra",
    "load_extra", "register_extra", "resolve_extra",
]
