"""Zoo profiles of the user's own labelled images: ``python -m hynea_pl zoo build --data PATH --name NAME``.

A folder (the ``ImageFolder`` layout ``PATH/<class>/<file>``, or a CSV of ``file,label``) is read once into an image
store in the cache (:mod:`hynea_pl.data.image_store`: uint8, memory-mapped, ``zoo/data/<fingerprint>/``), cut into
the zoo's splits per class (:mod:`hynea_pl.zoo.splits`: ``held_out``, ``sut``, ``method``, ``judges``) and trained
with the same code, configs and gates as the MNIST profiles: a built-in profile (``full`` or ``tiny``) is the base
whose model and gate configs it takes, with the changes :data:`FOLDER_DEFAULTS` makes for images other than digits
and any ``--set KEY=VALUE``. The profile is saved as ``zoo/profiles/<NAME>.json``, so that ``zoo://NAME/...`` and
``ZooOracle(profile=NAME)`` find it in any later process.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hynea_pl.data.image_store import (
    ImageStore, check_class_counts, image_folder_fingerprint, listed_labels, open_image_store, stratified_splits,
    write_image_store,
)
from hynea_pl.zoo import train
from hynea_pl.zoo.cache import zoo_dir
from hynea_pl.zoo.labelled.config import FolderGateConfig, GateConfig, ZooProfile
from hynea_pl.zoo.labelled.zoo import Zoo, build_zoo
from hynea_pl.zoo.mnist.profiles import PROFILES
from hynea_pl.zoo.profiles import register_profile_source
from hynea_pl.zoo.splits import SPLITS, ImageSplit, ImageSplits, StoredImages

#: the fraction of each class's images in each split, in the order they are cut (held out first)
SPLIT_FRACTIONS: dict[str, float] = {"held_out": 0.15, "sut": 0.25, "method": 0.30, "judges": 0.30}
#: the fewest images of a class the splits accept (a few per split, so that every model sees the class)
MIN_PER_CLASS = 12
#: profile names: lower-case letters, digits, ``-`` and ``_`` (they name cache folders and ``zoo://`` URIs)
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")

#: The gates of a profile built from a folder on the ``full`` base. Any domain, so lower than the digits' (an
#: MNIST folder passes the digits' own); the build prints each value beside its threshold, and ``--set
#: gates.NAME=VALUE`` changes one.
FOLDER_GATES = FolderGateConfig(
    sut_accuracy=0.80, oracle_accuracy=0.80, reconstruction_accuracy=0.75,
    generated_accuracy=0.70, verdict_ceiling=0.60, max_build_s=1500.0,
)

#: The autoencoder's steps on the ``full`` base. The digits' 300 leave a folder's colours half learnt: on 60,000
#: letters in random colours, a reconstruction's mean colour was off by 0.15 (of 1) after 300 steps, 0.012 after
#: 900 and 0.009 after 1200 (about 4 min more on 2 cores).
FOLDER_AUTOENCODER_STEPS = 1200

#: The autoencoder's latent channels for colour images on the ``full`` base. The digits' 4 keep two of three
#: directions of colour: on 60,000 coloured shapes, its reconstructions drew red and blue alike (their correlation
#: 0.998, against 0.43 in the images) and every generated shape was green, magenta or grey (colour fidelity 0.18);
#: with 8, the reconstructions' correlation was 0.56.
FOLDER_COLOUR_LATENT_CHANNELS = 8

#: The LDM's steps for colour images on the ``full`` base (8 latent channels): at the digits' 800, the coloured
#: shapes' LDM drew shapes the SUT read as their class in 0.555 of its samples; at 1600, in 0.905.
FOLDER_COLOUR_DENOISER_STEPS = 1600


@dataclass(frozen=True)
class FolderDataConfig:
    """A folder profile's images: its image store (by ``fingerprint``), their size, channels and classes, and each
    split's fraction of every class (cut from one seeded permutation per class). Every field is part of every
    model's cache key, so that new images train new models."""

    fingerprint: str
    image_size: int
    channels: int
    num_classes: int
    class_names: tuple[str, ...]
    held_out: float = SPLIT_FRACTIONS["held_out"]
    sut: float = SPLIT_FRACTIONS["sut"]
    method: float = SPLIT_FRACTIONS["method"]
    judges: float = SPLIT_FRACTIONS["judges"]
    split_seed: int = 0

    def read_splits(self) -> ImageSplits:
        """The folder's training splits, each with the held-out images."""
        return folder_splits(self)

    def read_held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The held-out images and their classes."""
        return folder_held_out(self)


def store_path(fingerprint: str) -> Path:
    """The cache folder of the image store with ``fingerprint``."""
    return zoo_dir() / "data" / fingerprint


def profile_path(name: str) -> Path:
    return zoo_dir() / "profiles" / f"{name}.json"


@functools.lru_cache(maxsize=2)
def _split_indices(data: FolderDataConfig) -> tuple[ImageStore, dict[str, torch.Tensor]]:
    """Each split's indices into the store, in a seeded random order (as the MNIST splits are): the store lists
    the images class by class, and a model that takes the first ``n`` of a split must see every class."""
    store = open_image_store(store_path(data.fingerprint))
    fractions = {name: getattr(data, name) for name in ("held_out", *SPLITS)}
    splits = stratified_splits(store.labels, fractions, data.split_seed, store.class_names)
    order = torch.Generator().manual_seed(data.split_seed)
    return store, {name: index[torch.randperm(len(index), generator=order)] for name, index in splits.items()}


def folder_held_out(data: FolderDataConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out images ``(N, C, S, S)`` in [0, 1] and their classes ``(N,)``: no model trains on them."""
    store, index = _split_indices(data)
    return store.float_images(index["held_out"]), store.labels[index["held_out"]]


def folder_splits(data: FolderDataConfig) -> ImageSplits:
    """The folder's training splits, each read from the store on demand (:class:`StoredImages`), with the held-out
    images (as floats)."""
    store, index = _split_indices(data)
    test_images, test_labels = folder_held_out(data)
    return ImageSplits(**{name: ImageSplit(StoredImages(store.images, index[name]), store.labels[index[name]],
                                           test_images, test_labels) for name in SPLITS})


# ------------------------------------------------------------------------------------------- the profile
def _set(config: Any, path: Sequence[str], value: str, key: str) -> Any:
    """``config`` (a dataclass, or a dict of them) with the field at ``path`` set to ``value`` (parsed as JSON,
    else kept as text)."""
    head, rest = path[0], path[1:]
    if isinstance(config, dict):
        if head not in config:
            raise ValueError(f"--set {key}: no {head!r} here; choose one of {sorted(config)}")
        return {**config, head: _set(config[head], rest, value, key) if rest else _parse(value)}
    fields = {field.name for field in dataclasses.fields(config)}
    if head not in fields:
        raise ValueError(f"--set {key}: {type(config).__name__} has no field {head!r}; choose one of {sorted(fields)}")
    new = _set(getattr(config, head), rest, value, key) if rest else _checked(key, config, head, _parse(value))
    return dataclasses.replace(config, **{head: new})


#: integer settings that must be at least 1 (every other integer setting: at least 0)
POSITIVE_INTS = frozenset({"attention_head_dim", "batch_size", "cross_attention_dim", "depth", "dim", "elastic_grid",
                           "generated_per_class", "hidden", "k", "kernel_size", "latent_channels", "layers_per_block",
                           "max_steps", "norm_num_groups", "num_inference_steps", "num_train_timesteps",
                           "patch_size"})
#: number settings that are fractions, at most 1
FRACTIONS = frozenset({"dropout", "eta", "ema_decay", "label_dropout", "label_smoothing"})


def _checked(key: str, config: Any, field: str, value: Any) -> Any:
    """``value`` for ``config.field`` when it has the field's type and lies in its range (the same rules as the
    ``fit`` options: counts >= 1, steps and sizes >= 0, fractions in [0, 1], gates in [0, 1] or null, the build
    budget > 0 or null); else a one-line error naming ``--set key``."""
    old = getattr(config, field)
    shown = value if isinstance(value, str) else json.dumps(value)

    def bad(allowed: str) -> ValueError:
        return ValueError(f"--set {key}={shown}: {allowed}")

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    gate = isinstance(config, GateConfig) and isinstance(old, float | None) and field != "max_build_s"
    if value is None:
        if old is None or gate or field == "max_build_s":
            return None
        raise bad("this setting needs a value")
    if isinstance(old, bool):
        if not isinstance(value, bool):
            raise bad("must be true or false")
        return value
    if isinstance(old, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("must be an integer")
        low = 1 if field in POSITIVE_INTS else 0
        if value < low:
            raise bad(f"must be >= {low}")
        return value
    if isinstance(old, float) or old is None:
        if not number(value):
            raise bad("must be a number")
        if field == "max_build_s":
            if value <= 0:
                raise bad("must be > 0 (seconds), or null for no budget")
        elif value < 0:
            raise bad("must be >= 0")
        elif (gate or field in FRACTIONS or field.endswith("_prob")) and value > 1:
            raise bad("must be at most 1" + (" (or null: recorded, not enforced)" if gate else ""))
        return float(value)
    if isinstance(old, tuple):
        if not isinstance(value, list) or not all(number(v) for v in value):
            raise bad(f"must be a list of numbers, like {json.dumps(list(old))}")
        if all(isinstance(v, int) for v in old) and old:
            if not all(isinstance(v, int) and v >= 1 for v in value) or not value:
                raise bad(f"must be a list of integers >= 1, like {json.dumps(list(old))}")
        return tuple(value)
    if isinstance(old, str) and not isinstance(value, str):
        raise bad("must be text")
    return value


def _parse(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def apply_settings(profile: ZooProfile, settings: Sequence[str]) -> ZooProfile:
    """``profile`` with each ``KEY=VALUE`` of ``settings`` set (``denoiser.max_steps=1600``,
    ``gates.verdict_ceiling=0.5``, ``oracles.oracle-1.max_steps=900``); a bad key is a one-line error."""
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE (e.g. denoiser.max_steps=1600), got {setting!r}")
        path = key.split(".")
        if path[0] in ("name", "data"):
            raise ValueError(f"--set {key}: the profile's name and data come from --name and --data")
        profile = _set(profile, path, value, key)
    return profile


def folder_profile_from(name: str, data: FolderDataConfig | None, base: str = "full",
                        settings: Sequence[str] = ()) -> ZooProfile:
    """The profile ``name`` of ``data`` on the built-in profile ``base``: its model configs (its judges and their vote
    included), then on ``full`` the autoencoder's
    :data:`FOLDER_AUTOENCODER_STEPS` (and, for colour images, :data:`FOLDER_COLOUR_LATENT_CHANNELS` and
    :data:`FOLDER_COLOUR_DENOISER_STEPS`) and the gates
    :data:`FOLDER_GATES` (``tiny`` keeps its own steps and gates:
    none enforced), then ``settings``."""
    if base not in PROFILES:
        raise ValueError(f"unknown base profile {base!r}; choose one of {sorted(PROFILES)}")
    template = PROFILES[base]
    if base == "full":
        colour = data is not None and data.channels == 3
        template = dataclasses.replace(template, gates=FOLDER_GATES, autoencoder=dataclasses.replace(
            template.autoencoder, max_steps=FOLDER_AUTOENCODER_STEPS,
            latent_channels=FOLDER_COLOUR_LATENT_CHANNELS if colour else template.autoencoder.latent_channels))
        if colour:
            template = dataclasses.replace(template, denoiser=dataclasses.replace(
                template.denoiser, max_steps=FOLDER_COLOUR_DENOISER_STEPS))
    profile = dataclasses.replace(template, name=name, data=data)
    return apply_settings(profile, settings)


def save_folder_profile(name: str, data: FolderDataConfig, base: str, settings: Sequence[str]) -> ZooProfile:
    """Check, then save the recipe of profile ``name`` (``zoo/profiles/<name>.json``, unfinished until
    :func:`finish_folder_profile`) and return the profile."""
    profile = folder_profile_from(name, data, base, settings)
    path = profile_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    recipe = {"name": name, "base": base, "settings": list(settings), "data": dataclasses.asdict(data),
              "finished": False}
    path.write_text(json.dumps(recipe, indent=1) + "\n")
    return profile


def finish_folder_profile(name: str) -> None:
    """Mark the saved recipe of ``name`` as a finished build: from now on it is a profile."""
    path = profile_path(name)
    recipe = json.loads(path.read_text())
    path.write_text(json.dumps({**recipe, "finished": True}, indent=1) + "\n")


def describe(store: ImageStore) -> str:
    """One line on a store: its images, classes, size and what was skipped or converted."""
    counts = torch.bincount(store.labels, minlength=store.num_classes).tolist()
    notes = [f"skipped {dict(store.skipped)}" if store.skipped else "",
             f"converted {dict(store.converted)}" if store.converted else ""]
    line = (f"{len(store)} images of {store.num_classes} classes ({store.channels} x {store.image_size} x "
            f"{store.image_size}; fewest {min(counts)}, most {max(counts)} per class)")
    return "; ".join([line, *(note for note in notes if note)])


def _recipe(name: str) -> dict | None:
    """The saved recipe of a finished build of profile ``name`` (a recipe saved by a build that has not finished,
    or never will, is not a profile yet), or ``None``."""
    path = profile_path(name)
    if not path.is_file():
        return None
    recipe = json.loads(path.read_text())
    return recipe if recipe.get("finished", True) else None


def folder_profile(name: str) -> ZooProfile | None:
    """The saved profile ``name`` (its build finished), or ``None`` when there is none."""
    recipe = _recipe(name)
    if recipe is None:
        return None
    data = FolderDataConfig(**{**recipe["data"], "class_names": tuple(recipe["data"]["class_names"])})
    return folder_profile_from(name, data, recipe["base"], recipe["settings"])


def folder_profile_names() -> list[str]:
    """The saved folder profiles whose build finished."""
    folder = zoo_dir() / "profiles"
    names = sorted(path.stem for path in folder.glob("*.json")) if folder.is_dir() else []
    return [name for name in names if _recipe(name) is not None]


def check_name(name: str) -> str:
    if name in PROFILES:
        raise ValueError(f"--name {name}: a built-in profile has that name; choose another")
    if not NAME.fullmatch(name):
        raise ValueError(f"--name {name!r}: use 1-40 lower-case letters, digits, '-' or '_' (it names cache folders)")
    return name


def read_folder(source: str | Path, size: int, channels: int | None = None,
                labels_csv: str | None = None) -> ImageStore:
    """The image store of ``source`` in the cache: written on first use (or when its files changed, showing its
    progress), read again otherwise (its fingerprint comes from the file list, sizes and times). Refuses data that
    cannot train a zoo (:class:`~hynea_pl.data.image_store.BadImageData`, one line), including a class with fewer
    than :data:`MIN_PER_CLASS` images."""
    from hynea_pl.progress import StepProgress
    from hynea_pl.zoo.train import console

    needed = f"the zoo's splits {', '.join(SPLIT_FRACTIONS)} need them"
    labels, names = listed_labels(source, labels_csv)
    check_class_counts(labels, names, MIN_PER_CLASS, needed)  # before reading: the listed files
    fingerprint = image_folder_fingerprint(source, size, channels, labels_csv)
    path = store_path(fingerprint)
    if not (path / "meta.json").is_file():
        with StepProgress(f"zoo: reading {source}", 0, unit="image", console=console) as progress:
            def advance(done: int, total: int) -> None:
                progress.set_total(total)
                progress.update(done - progress.completed)

            written = write_image_store(source, zoo_dir() / "data" / f"incoming-{fingerprint}", size, channels,
                                        labels_csv, advance)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (path / "meta.json").is_file():
            written.path.rename(path)
    store = open_image_store(path)
    check_class_counts(store, None, MIN_PER_CLASS, needed)  # after: the images read
    return store


def data_config_of(store: ImageStore) -> FolderDataConfig:
    return FolderDataConfig(fingerprint=store.fingerprint, image_size=store.image_size, channels=store.channels,
                            num_classes=store.num_classes, class_names=tuple(store.class_names))




def build_folder_zoo(source: str | Path, name: str, size: int = 32, channels: int | None = None,
                     labels_csv: str | None = None, base: str = "full", settings: Sequence[str] = ()) -> Zoo:
    """A zoo of the user's labelled images: ``source`` read into the cache, profile
    ``name`` saved (the models and gates of the built-in profile ``base``, changed by ``settings``: ``KEY=VALUE``)
    and built (every model trained, its gates measured). Bad data or a bad setting is a one-line error before any
    training; a build that fails or is stopped half-way leaves no profile behind (a killed one, a recipe marked
    unfinished, which no lookup offers)."""
    check_name(name)
    if isinstance(size, bool) or not isinstance(size, int) or size < 16 or size % 8:
        raise ValueError(f"--size {size}: use a multiple of 8 from 16 (the autoencoder and the denoiser halve it "
                         "three times); on a CPU keep it <= 64")
    folder_profile_from(name, None, base, settings)  # a bad base or setting: one line before reading
    store = read_folder(source, size, channels, labels_csv)
    train.console.print(f"[bold]zoo[/]: {describe(store)}", soft_wrap=True)
    profile = save_folder_profile(name, data_config_of(store), base, settings)
    try:
        zoo = build_zoo(profile, verbose=False, released=False)
    except BaseException:  # a failed or interrupted build leaves no profile (its trained models stay cached)
        profile_path(name).unlink(missing_ok=True)
        raise
    finish_folder_profile(name)
    return zoo


register_profile_source(folder_profile, folder_profile_names)

__all__ = [
    "FOLDER_AUTOENCODER_STEPS", "FOLDER_COLOUR_DENOISER_STEPS", "FOLDER_COLOUR_LATENT_CHANNELS", "FOLDER_GATES",
    "MIN_PER_CLASS", "SPLIT_FRACTIONS",
    "FolderDataConfig", "apply_settings", "build_folder_zoo", "check_name", "data_config_of", "describe",
    "finish_folder_profile", "folder_held_out", "folder_profile", "folder_profile_from", "folder_profile_names",
    "folder_splits", "read_folder", "save_folder_profile", "store_path",
]
