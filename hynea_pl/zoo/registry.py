"""The zoo's one registry of components, and the one routine that builds, gates and loads any of them.

A *component* is a model the zoo trains and caches (the MNIST demo's SUT, embedder, autoencoder, LDM and oracle
members, the StyleGAN, the digit-scene models) or a *bundle* of components gated together (the MNIST base zoo,
``zoo``). Each is a :class:`Component`: its name, its training config per profile, how to train it, its gates
(config per profile and ``measure``), how to load it and what it depends on. :func:`build_component` builds what
is missing of any of them (dependencies first), measures its gates into a quality manifest, shows the quality
table and the build-time budget, and :func:`load_component` / :func:`resolve_zoo_uri` hand it out.

Registering a component::

    from hynea_pl.zoo.registry import Component, register_component

    register_component(Component(
        name="stylegan",
        train_configs={"full": FullConfig(), "tiny": TinyConfig()},  # per profile: a mapping by name, or a
        gate_configs={"full": Gates(), "tiny": Gates(...)},          # callable ZooProfile -> config (frozen
                                                                     # dataclasses; gates with ``max_build_s``)
        train=train_fn,      # (train_cfg, BuildContext, staging folder) -> None: writes the weights
        measure=measure_fn,  # (gate_cfg, entry folder, BuildContext, staging folder) -> list[Gate]
        load=load_fn,        # (entry folder) -> the loaded, frozen component
        depends=("sut",),    # components built (and gated) first; their entries enter this one's key
        gated_by=(),         # components its gates use (built before measuring; part of the gates' key only)
        base_gated=True,     # whether ``measure`` uses the base zoo's models (hynea_pl.zoo.labelled.zoo.load_zoo;
                             # then the base zoo's manifest enters the gates' key)
        uri_target="",       # what ``zoo://<profile>/<name>`` resolves to inside the entry ("" = the folder)
    ))

The built-in components are not registered at import time: each module that defines some lists them in
``ZOO_COMPONENTS``, and the registry reads that list on first lookup (the base zoo's module :data:`BASE_MODULE`
on any lookup, an on-demand component's module from :data:`EXTRA_MODULES` only when that name is looked up, so
the base zoo never imports the StyleGAN or the scene models).

Kinds of components, told apart by their fields:

- an *extra* (``train`` set, ``part_of`` unset; e.g. ``stylegan``): trained on first use only, never by the base
  zoo, with a manifest of its own (:func:`extra_names`; ``python -m hynea_pl zoo build`` builds them too unless
  told ``--extras none``);
- a *bundle* (``train`` unset; the base zoo ``zoo``): no weights of its own; its ``depends`` are its *members*,
  trained when missing and gated together by its ``measure`` in one manifest;
- a *member* (``part_of`` names its bundle; e.g. ``sut``): built (and gated) by building its bundle.

Cache layout (the helpers of :mod:`hynea_pl.zoo.cache`: atomic, content-addressed). The keys are the ones the
zoo has always used, so that cached entries stay valid:

- ``zoo/<name>-<key>/``: a trained component; key = hash of (name, the profile's data config, the train config,
  then its dependencies: a member names them by their keys, one part each; an extra by a ``{dep: entry name}``
  mapping); ``build.json`` holds its training seconds;
- ``zoo/<profile>-<name>-<key>/quality.json``: an extra's gates; key = hash of (its entry name, its ``gate_inputs``
  if any, the gate config, the base zoo's manifest name when ``base_gated``, the entry names of ``gated_by``), plus
  whatever ``measure`` writes (e.g. ``samples.png``);
- ``zoo/<profile>-<key>/quality.json``: a bundle's gates; key = hash of (``{member: key}``, its
  ``gate_inputs``, the gate config).

The build time (training of the entries a manifest covers + measuring) is a budget gate (``max_build_s`` of the
gate config; never fatal); a missed fatal gate raises :class:`~hynea_pl.zoo.quality.ZooQualityError` and leaves
no manifest, so the component is never loaded as valid (the trained entries stay cached).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hynea_pl.zoo import train
from hynea_pl.errors import one_line
from hynea_pl.zoo.cache import atomic_entry, config_key, is_complete, missed_record, zoo_dir
from hynea_pl.zoo.profiles import get_profile
from hynea_pl.zoo.quality import Gate, ZooBuildError, ZooQualityError, quality_table
from hynea_pl.zoo import released as release
from hynea_pl.zoo.released import install_released, matches_released

if TYPE_CHECKING:
    from hynea_pl.zoo.labelled.config import ZooProfile

#: The bundle of the MNIST demo's components (the "base zoo"), defined with them in :data:`BASE_MODULE`.
BASE_ZOO = "zoo"
#: The module that defines the base zoo's components (read on any lookup).
BASE_MODULE = "hynea_pl.zoo.labelled.zoo"
#: ``name -> module`` of the on-demand components (read only when that name is looked up).
EXTRA_MODULES: dict[str, str] = {
    "stylegan": "hynea_pl.zoo.stylegan.component",
    # digit scenes: the multi-label attribute SUT and its oracle, the detector, the layout scene generator
    "attribute_sut": "hynea_pl.zoo.scenes.attributes",
    "attribute_oracle": "hynea_pl.zoo.scenes.attributes",
    "detector_sut": "hynea_pl.zoo.scenes.detector",
    "layout_scenes": "hynea_pl.zoo.scenes.layout_scenes",
}

_REGISTRY: dict[str, Component] = {}

#: A per-profile setting: a mapping by profile name, or a function of the profile.
PerProfile = Mapping[str, Any] | Callable[[Any], Any]


@dataclass(frozen=True)
class Component:
    """A zoo component (see the module doc): per-profile configs, how to train, gate and load it."""

    name: str
    #: the training config per profile (part of the entry's key); ``None`` for a bundle
    train_configs: PerProfile | None
    #: the gate config per profile (part of the manifest's key; ``max_build_s`` is its build-time budget);
    #: ``None`` for a member (its bundle's gates cover it)
    gate_configs: PerProfile | None
    #: ``(train_cfg, BuildContext, staging folder) -> None``: writes the weights; ``None`` for a bundle
    train: Callable[[Any, BuildContext, Path], object] | None
    #: ``(gate_cfg, entry folder or None for a bundle, BuildContext, staging folder) -> list[Gate]``
    measure: Callable[[Any, Path | None, BuildContext, Path], list[Gate]] | None
    #: ``(entry folder) -> the loaded component``; ``None`` for a bundle
    load: Callable[[Path], Any] | None
    depends: tuple[str, ...] = ()
    uri_target: str = ""
    description: str = field(default="", compare=False)
    #: whether ``measure`` uses the base zoo's models (it loads them with :func:`hynea_pl.zoo.labelled.zoo.load_zoo`,
    #: which builds the base zoo on first use); then the base zoo's manifest is part of the gates' key
    base_gated: bool = True
    #: other components that ``measure`` uses (e.g. gates that score a generator's images with SUTs):
    #: built before measuring, in ``context.deps``, and their entries are part of the gates' key, not of the entry's
    gated_by: tuple[str, ...] = ()
    #: the bundle that trains and gates this component (the base zoo's members: :data:`BASE_ZOO`)
    part_of: str | None = None
    #: a bundle's settings besides its gate config that change what its gates measure (part of the manifest's key;
    #: the base zoo: its sampler)
    gate_inputs: Callable[[ZooProfile], tuple] | None = None
    #: what to change when the gate of this name is missed (shown in the error); ``None``: nothing said
    advice: Callable[[str], str] | None = field(default=None, compare=False)

    @property
    def is_bundle(self) -> bool:
        return self.train is None

    @property
    def is_extra(self) -> bool:
        """Built on demand, with a manifest of its own (neither a bundle nor a bundle's member)."""
        return self.train is not None and self.part_of is None


class BuildContext:
    """What a component's ``train`` / ``measure`` may use: ``profile``, ``deps`` (name -> built entry folder of each
    of its ``depends``, then of its ``gated_by``; a bundle's: of its members) and ``data`` (the profile's digit
    splits, :class:`~hynea_pl.zoo.splits.ImageSplits`, loaded on first access: a component trains on its own
    split)."""

    def __init__(self, profile: ZooProfile, deps: Mapping[str, Path]) -> None:
        self.profile = profile
        self.deps = dict(deps)

    @cached_property
    def data(self):
        from hynea_pl.zoo.splits import load_splits

        return load_splits(self.profile.data)


@dataclass(frozen=True)
class Built:
    """A built component: its entry folder (``None`` for a bundle), its quality manifest folder and the entry folders
    that manifest covers (a bundle's members, or the component itself)."""

    name: str
    profile: str
    entry: Path | None
    manifest: Path
    entries: dict[str, Path]

    @property
    def quality(self) -> dict:
        return json.loads((self.manifest / "quality.json").read_text())


# ----------------------------------------------------------------------------------------------- the registry
def _read_components(module: str) -> None:
    for component in importlib.import_module(module).ZOO_COMPONENTS:
        _REGISTRY.setdefault(component.name, component)


def register_component(component: Component) -> None:
    """Add (or replace) a component; a bundle or a bundle's member (the base zoo's) is never replaced."""
    _read_components(BASE_MODULE)
    current = _REGISTRY.get(component.name)
    if current is not None and not current.is_extra:
        raise ValueError(f"zoo component {component.name!r} clashes with a base zoo component")
    _REGISTRY[component.name] = component


def get_component(name: str) -> Component:
    """The component ``name`` (reading its built-in module on first use); one-line error otherwise."""
    if name not in _REGISTRY:
        _read_components(BASE_MODULE)
    if name not in _REGISTRY and name in EXTRA_MODULES:
        _read_components(EXTRA_MODULES[name])
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown zoo component {name!r}; choose one of {component_names()}") from None


def component_names() -> list[str]:
    """Every component that has an entry (base members and extras, registered or built in; not the bundles)."""
    _read_components(BASE_MODULE)
    return sorted({*(n for n, c in _REGISTRY.items() if not c.is_bundle), *EXTRA_MODULES})


def extra_names() -> list[str]:
    """The on-demand components (registered or built in)."""
    _read_components(BASE_MODULE)
    return sorted({*(n for n, c in _REGISTRY.items() if c.is_extra), *EXTRA_MODULES})


# ---------------------------------------------------------------------------------------------- cache folders
def _profile(profile: ZooProfile | str) -> ZooProfile:
    return get_profile(profile) if isinstance(profile, str) else profile


def _per_profile(setting: PerProfile, component: Component, profile: ZooProfile, what: str) -> Any:
    if callable(setting):
        return setting(profile)
    try:
        return setting[profile.name]
    except KeyError:
        raise ValueError(f"zoo component {component.name!r} has no {what} for profile {profile.name!r} "
                         f"(it has {sorted(setting)})") from None


def _entry_key(profile: ZooProfile, component: Component) -> str:
    cfg = _per_profile(component.train_configs, component, profile, "train config")
    if component.part_of:  # a member names its dependencies by their keys (the base zoo's form)
        deps = [_entry_key(profile, get_component(dep)) for dep in component.depends]
        return config_key(component.name, profile.data, cfg, *deps)
    deps = {dep: _entry(profile, get_component(dep)).name for dep in component.depends}
    return config_key(component.name, profile.data, cfg, deps)


def _entry(profile: ZooProfile, component: Component) -> Path | None:
    return None if component.is_bundle else zoo_dir() / f"{component.name}-{_entry_key(profile, component)}"


def _manifest(profile: ZooProfile, component: Component, entry: Path | None) -> Path:
    if component.part_of:
        bundle = get_component(component.part_of)
        return _manifest(profile, bundle, None)
    gate_cfg = _per_profile(component.gate_configs, component, profile, "gate config")
    inputs = component.gate_inputs(profile) if component.gate_inputs else ()
    if component.is_bundle:
        keys = {member: _entry_key(profile, get_component(member)) for member in component.depends}
        return zoo_dir() / f"{profile.name}-{config_key(keys, *inputs, gate_cfg)}"
    # the base zoo's manifest enters the key only for an extra gated against base models (stylegan): a scene
    # component's gates do not change with the MNIST demo's zoo
    base = component_paths(profile, BASE_ZOO)[1].name if component.base_gated else None
    gating = [component_paths(profile, other)[0].name for other in component.gated_by]
    return zoo_dir() / f"{profile.name}-{component.name}-{config_key(entry.name, *inputs, gate_cfg, base, *gating)}"


def component_paths(profile: ZooProfile | str, name: str) -> tuple[Path | None, Path]:
    """The cache folders ``(entry, quality manifest)`` of component ``name`` in ``profile`` (nothing is built); a
    member's manifest is its bundle's, a bundle's entry is ``None``."""
    profile = _profile(profile)
    component = get_component(name)
    entry = _entry(profile, component)
    return entry, _manifest(profile, component, entry)


# ------------------------------------------------------------------------------------------------- building
def _timed_entry(path: Path, build: Callable[[Path], object], what: str = "") -> None:
    """Build the entry ``path`` (atomically) and record its build time; an error of the build is a
    :class:`~hynea_pl.zoo.quality.ZooBuildError` naming ``what`` was built and why, in one line."""
    with atomic_entry(path) as staging:
        start = time.perf_counter()
        with _named_failure(f"training {what}" if what else f"building {path.name}"):
            build(staging)
        (staging / "build.json").write_text(json.dumps({"build_s": time.perf_counter() - start}))


@contextmanager
def _named_failure(doing: str) -> Iterator[None]:
    """Turn an error of the block (not an interrupt, not a missed gate) into a one-line :class:`ZooBuildError`:
    ``zoo: <doing> failed: <reason>``."""
    try:
        yield
    except (ZooQualityError, ZooBuildError):
        raise
    except Exception as error:
        raise ZooBuildError(f"zoo: {doing} failed: {one_line(error)}") from error


def _train_member(profile: ZooProfile, name: str, members: dict[str, Path], verbose: bool, released: bool) -> None:
    """Train bundle member ``name`` when missing, after the members it depends on."""
    component = get_component(name)
    deps = {}
    for dep in component.depends:
        if dep in members:
            _train_member(profile, dep, members, verbose, released)
            deps[dep] = members[dep]
        else:
            deps[dep] = build_component(profile, dep, verbose=verbose, released=released).entry
    if not is_complete(members[name]):
        cfg = _per_profile(component.train_configs, component, profile, "train config")
        context = BuildContext(profile, deps)
        _timed_entry(members[name], lambda out: component.train(cfg, context, out), f"{profile.name}/{name}")


def _measure(profile: ZooProfile, component: Component, built: Built, context: BuildContext,
             verbose: bool) -> None:
    """Measure the gates of ``built`` into its manifest: the quality table (after a build when ``verbose``, always
    when a gate is missed), the build-time budget, :class:`ZooQualityError` on a missed fatal gate."""
    gate_cfg = _per_profile(component.gate_configs, component, profile, "gate config")
    if component.is_bundle:
        title, what, header = profile.name, f"profile {profile.name!r}", {}
    else:
        title = f"{profile.name}/{component.name}"
        what, header = f"extra {title!r}", {"extra": component.name, "entry": str(built.entry)}
    with atomic_entry(built.manifest) as staging:
        start = time.perf_counter()
        with _named_failure(f"measuring the gates of {title}"):
            gates = component.measure(gate_cfg, built.entry, context, staging)
        build_s = sum(json.loads((entry / "build.json").read_text())["build_s"] for entry in built.entries.values())
        build_s += time.perf_counter() - start
        time_gate = Gate("build_time_s", build_s, getattr(gate_cfg, "max_build_s", None),
                         higher_is_better=False, fatal=False)
        quality = {"profile": profile.name, **header, "gates": [g.as_dict() for g in (*gates, time_gate)]}
        if component.is_bundle:
            quality["entries"] = {name: entry.name for name, entry in built.entries.items()}  # in the zoo folder
        (staging / "quality.json").write_text(json.dumps(quality, indent=2))
        failed = [g for g in gates if not g.passed]
        if verbose or failed:
            train.console.print(quality_table(title, quality["gates"]))
        if failed:
            advice = component.advice or (lambda name: "")
            missed = "; ".join(f"{g.name} {g.value:.3g} {'<' if g.higher_is_better else '>'} {g.threshold:g}"
                               + (f" ({advice(g.name)})" if advice(g.name) else "") for g in failed)
            message = f"zoo {what} missed its quality gates: {missed}. {_after_a_miss(profile, component, built)}"
            _record_miss(built.manifest, message, quality)
            raise ZooQualityError(message)
    if not time_gate.passed:
        train.console.print(
            f"[yellow]zoo: warning:[/] {what} built in {build_s:.0f} s, over its {time_gate.threshold:.0f} s "
            f"budget (it passed its gates and is cached)", soft_wrap=True,
        )


def _after_a_miss(profile: ZooProfile, component: Component, built: Built) -> str:
    """What to do after ``built`` missed a gate: the entries are kept and not measured again; how to train again."""
    if component.is_bundle and all((release.RELEASED / entry.name).is_dir() for entry in built.entries.values()):
        again = f"python -m hynea_pl zoo build --profile {profile.name} --rebuild trains them again"
    elif component.is_bundle:
        again = "a setting that changes a model (zoo build --set KEY=VALUE) trains that model again"
    else:
        again = (f"python -m hynea_pl zoo build --profile {profile.name} --rebuild {component.name} trains it again "
                 "(training differs with the CPU and the thread count)")
        if (release.RELEASED / built.entry.name).is_dir():
            again += f", or delete {built.entry} to install the released weights"
    return f"The trained weights stay cached and are not measured again: {again}"


def _record_miss(manifest: Path, message: str, quality: dict) -> None:
    """Write the missed gates of ``manifest``'s entries (:func:`~hynea_pl.zoo.cache.missed_record`), atomically."""
    record = missed_record(manifest)
    staging = record.with_name(f"{record.name}.partial")
    staging.write_text(json.dumps({"error": message, "measured": time.time(), **quality}, indent=2))
    staging.replace(record)


def _recorded_miss(manifest: Path) -> ZooQualityError:
    """The error a build of ``manifest``'s unchanged entries raised, read back from its record."""
    record = json.loads(missed_record(manifest).read_text())
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record["measured"]))
    return ZooQualityError(f"{record['error']} (measured {when}; record: {missed_record(manifest)})")


def cache_folders(profile: ZooProfile | str, names: Iterable[str]) -> list[Path]:
    """The cache folders of components ``names`` in ``profile``: entries and quality manifests (a bundle: its members'
    entries and its manifest), in build order, each once."""
    out: list[Path] = []
    for name in names:
        component = get_component(name)
        for member in component.depends if component.is_bundle else (name,):
            out.append(component_paths(profile, member)[0])
        out.append(component_paths(profile, name)[1])
    return list(dict.fromkeys(out))


def build_component(profile: ZooProfile | str, name: str, verbose: bool = True, released: bool = True) -> Built:
    """Build what is missing of component ``name`` (a member: of its bundle) and of what it depends on, then measure
    and store its gates. A missing folder the package releases (:mod:`hynea_pl.zoo.released`) is installed, not
    trained, unless ``released`` is ``False``; the released gates go only with the released weights. Weights that
    missed their gates are not measured again: their recorded error is raised until they are trained again.

    Prints the quality table after a build when ``verbose`` (always when a gate is missed); nothing when cached.
    Raises :class:`ZooQualityError` on a missed fatal gate, leaving no manifest.
    """
    profile = _profile(profile)
    component = get_component(name)
    if component.part_of:
        bundle = build_component(profile, component.part_of, verbose=verbose, released=released)
        return Built(name, profile.name, bundle.entries[name], bundle.manifest, bundle.entries)
    entry, manifest = component_paths(profile, name)
    if component.is_bundle:
        covered = {member: component_paths(profile, member)[0] for member in component.depends}
    else:
        covered = {name: entry}
    built = Built(name, profile.name, entry, manifest, covered)
    installed: set[Path] = set()
    if released:
        installed = {path for path in covered.values() if not is_complete(path) and install_released(path)}
        # the released gates only with the released weights (not with weights trained here under the same name)
        if not is_complete(manifest) and all(p in installed or matches_released(p) for p in covered.values()):
            install_released(manifest)
    trained = all(is_complete(path) for path in covered.values())
    if is_complete(manifest) and trained:
        if installed:  # released weights replaced any that missed their gates here
            missed_record(manifest).unlink(missing_ok=True)
        return built
    if missed_record(manifest).is_file():
        if trained:  # the same weights missed their gates: say so again, do not measure them again
            raise _recorded_miss(manifest)
        missed_record(manifest).unlink()  # weights to train again: measure them when trained
    if component.is_bundle:
        for member in component.depends:
            _train_member(profile, member, covered, verbose, released)
        context = BuildContext(profile, covered)
    else:
        context = BuildContext(profile, {dep: build_component(profile, dep, verbose=verbose, released=released).entry
                                         for dep in component.depends})
        if not is_complete(entry):
            cfg = _per_profile(component.train_configs, component, profile, "train config")
            _timed_entry(entry, lambda out: component.train(cfg, context, out), f"{profile.name}/{name}")
    for other in component.gated_by:
        context.deps[other] = build_component(profile, other, verbose=verbose, released=released).entry
    _measure(profile, component, built, context, verbose)
    return built


def load_component(profile: ZooProfile | str, name: str) -> Any:
    """The loaded component ``name`` of ``profile`` (built on first use, showing its progress and quality table)."""
    component = get_component(name)
    if component.load is None:
        raise ValueError(f"zoo component {name!r} is a bundle of components, it has nothing to load")
    return component.load(build_component(profile, name, verbose=True).entry)


def resolve_zoo_uri(uri: str) -> Path:
    """``zoo://<profile>/<component>`` -> a local path, building the component on first use: its entry folder, or
    its ``uri_target`` inside it (the state-dict file of the classifiers: ``sut``, ``embedder``, the oracle members
    ``steer-cnn``, ``oracle-1``, ...; the folder of ``ldm``, ``autoencoder``; an extra's, e.g. ``stylegan``, per
    its registration)."""
    profile, _, name = uri.removeprefix("zoo://").partition("/")
    names = component_names()
    if name not in names:
        raise ValueError(f"unknown zoo component in {uri!r}; choose one of {names}")
    entry = build_component(profile, name, verbose=True).entry
    target = get_component(name).uri_target
    return entry / target if target else entry


__all__ = [
    "BASE_MODULE", "BASE_ZOO", "EXTRA_MODULES", "BuildContext", "Built", "Component", "build_component",
    "cache_folders", "component_names", "component_paths", "extra_names", "get_component", "load_component", "register_component",
    "resolve_zoo_uri",
]
