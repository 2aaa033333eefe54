"""A campaign on a named zoo profile: ``fit --config configs/custom.yaml --profile NAME`` (or ``profile: NAME`` in
a config file) points every zoo component of the config at that profile.

What the profile sets, in a parsed config (:func:`apply_profile`):

- every string that holds :data:`PLACEHOLDER` (``{profile}``): the zoo URIs (``zoo://{profile}/ldm``), the
  ``profile`` of the judges, the realism test, the steering model and the acceptance test, the output name;
- the profile's own classifier (``sut.init_args.weights: zoo://{profile}/sut``): its model's ``num_classes``,
  ``in_channels``, ``image_size``, ``channels``, ``hidden`` and ``dropout`` and its preprocessing's ``size`` and
  ``channels``, which its weights fix;
- ``cases.classes``: all of the profile's classes.

A value the config states (in a file or on the command line) wins over the profile's (:func:`stated_keys`); one
that contradicts it (a classifier of 10 classes on a 5-class profile) is a one-line error, and so is a SUT of
another class count (:func:`check_profile_sut`, once the SUT is built: ``--sut my_sut.yaml`` replaces the
profile's classifier).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace

#: the placeholder a config writes where the profile's name goes
PLACEHOLDER = "{profile}"
#: what fixes the profile's own classifier: (key under ``sut.init_args``, its value from the profile)
SUT_SHAPE: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("model.init_args.num_classes", lambda p: int(p.data.num_classes)),
    ("model.init_args.in_channels", lambda p: int(p.data.channels)),
    ("model.init_args.image_size", lambda p: int(p.data.image_size)),
    ("model.init_args.channels", lambda p: list(p.sut.channels)),
    ("model.init_args.hidden", lambda p: int(p.sut.hidden)),
    ("model.init_args.dropout", lambda p: float(p.sut.dropout)),
    ("preprocess.init_args.size", lambda p: int(p.data.image_size)),
    ("preprocess.init_args.channels", lambda p: int(p.data.channels)),
)


def _plain(key: str) -> str:
    """A dotted key without its ``init_args`` parts (``sut.init_args.model`` and ``sut.model`` are one key)."""
    return ".".join(part for part in key.split(".") if part != "init_args")


def _leaves(value: Any, prefix: str) -> Iterable[str]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, f"{prefix}.{key}" if prefix else str(key))
    elif prefix:
        yield prefix


def stated_keys(args: Sequence[str]) -> set[str]:
    """The dotted keys (without ``init_args``) that ``fit``'s arguments state: every leaf of each ``--config``
    file and every ``--section.option``; a section given whole (``--sut my_sut.yaml``) states all of it."""
    keys: set[str] = set()
    items = list(args)
    for index, arg in enumerate(items):
        if not arg.startswith("--"):
            continue
        flag, sep, inline = arg[2:].partition("=")
        value = inline if sep else (items[index + 1] if index + 1 < len(items) else None)
        if flag == "config":
            if value is not None and Path(value).is_file():
                content = yaml.safe_load(Path(value).read_text()) or {}
                keys.update(_plain(key) for key in _leaves(content, "") if isinstance(content, dict))
        elif flag:
            keys.add(_plain(flag))
    return keys


def _is_stated(key: str, stated: set[str] | None) -> bool:
    if stated is None:
        return True
    plain = _plain(key)
    return any(plain == s or plain.startswith(s + ".") for s in stated)


def _replace_placeholder(value: Any, name: str) -> Any:
    if isinstance(value, str):
        return value.replace(PLACEHOLDER, name)
    if isinstance(value, Namespace):
        for key, item in vars(value).items():
            setattr(value, key, _replace_placeholder(item, name))
        return value
    if isinstance(value, dict):
        return {key: _replace_placeholder(item, name) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_placeholder(item, name) for item in value]
    return value


def _placeholders(value: Any, prefix: str = "") -> list[str]:
    """The keys whose value still holds :data:`PLACEHOLDER`."""
    if isinstance(value, str):
        return [prefix] if PLACEHOLDER in value else []
    if isinstance(value, Namespace):
        value = vars(value)
    if isinstance(value, dict):
        return [key for k, item in value.items() for key in _placeholders(item, f"{prefix}.{k}" if prefix else k)]
    if isinstance(value, list):
        return [key for item in value for key in _placeholders(item, prefix)]
    return []


def apply_profile(config: Namespace, stated: set[str] | None) -> None:
    """Point ``config`` at its ``profile`` (in place; see the module docstring). ``stated``: the keys the config
    states (:func:`stated_keys`), ``None`` when it states every key (a parsed config given whole). Without a
    profile, a config that still holds :data:`PLACEHOLDER` is a one-line error."""
    name = config.get("profile")
    if not name:
        left = _placeholders(config)
        if left:
            raise ValueError(f"{left[0]} = {config.get(left[0])!r} names the zoo profile as {PLACEHOLDER}: give "
                             "--profile NAME (a profile built by python -m hynea_pl zoo build --data DIR --name NAME)")
        return
    from hynea_pl.zoo.profiles import get_profile

    profile = get_profile(name)
    _replace_placeholder(config, name)
    sut = config.get("sut")
    if sut is not None and str(sut.init_args.get("weights") or "") == f"zoo://{name}/sut":
        for key, value_of in SUT_SHAPE:
            wanted = value_of(profile)
            if key not in sut.init_args:
                continue
            if _is_stated(f"sut.{key}", stated):
                if sut.init_args[key] != wanted:
                    raise ValueError(f"sut.init_args.{key} = {sut.init_args[key]}: the classifier of profile "
                                     f"{name!r} has {wanted}, which its weights fix (leave it out to take the "
                                     "profile's)")
            else:
                sut.init_args[key] = wanted
    if not _is_stated("cases.classes", stated):
        config.cases.classes = list(range(int(profile.data.num_classes)))


def check_profile_sut(name: str | None, sut: Any) -> None:
    """Refuse a class-deciding SUT whose class count differs from the profile's (one line)."""
    if not name or not getattr(sut, "decision_is_class", False):
        return
    from hynea_pl.campaign.validation import class_count
    from hynea_pl.zoo.profiles import get_profile

    count, wanted = class_count(sut), int(get_profile(name).data.num_classes)
    if count is not None and count != wanted:
        raise ValueError(f"the SUT ({type(sut).__name__}) decides among {count} classes, profile {name!r} has "
                         f"{wanted}: test a classifier of the profile's classes (--sut my_sut.yaml)")
