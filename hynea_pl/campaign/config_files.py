"""The files ``fit --config`` reads: a path, or a shipped config by its name; and the files that are no config.

The shipped configs are the checkout's ``configs/`` folder (installed from a wheel: ``hynea_pl/configs``).
``--config mnist`` (or ``mnist.yaml``, ``configs/mnist.yaml``, ``overlays/hynea_paper``) names one of them when no
such file exists where the command runs; a path that exists is read as given.

Two kinds of file are no config on their own, and run alone each is one line saying what it is:

- a *section*: one section of configs, which they read by a relative path (``config: sections/hynea.yaml``,
  ``oracle: sections/scenes_oracle.yaml``); the shipped ones are in ``configs/sections/``;
- an *overlay*: options layered after a config that sets the generator and the SUT
  (``--config mnist --config overlays/hynea_paper``); the shipped ones are in ``configs/overlays/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

#: the sections of a fit config (its schema, :func:`hynea_pl.campaign.config.fit_parser`) a file may set
FIT_SECTIONS = frozenset({"config", "seed_everything", "profile", "generator", "sut", "oracle", "realism", "stability",
                          "model", "cases", "budget", "trainer", "output"})
#: the sections without which nothing runs: a config sets them; a section or an overlay does not
REQUIRED_SECTIONS = ("generator", "sut")


class NotAConfig(ValueError):
    """A ``--config`` file that is a section or an overlay, run on its own (one line: what it is, what to run)."""


def shipped_configs() -> Path:
    """The folder of the shipped configs: ``hynea_pl/configs`` in an installed wheel, else the checkout's
    ``configs/``."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "configs"
    return installed if installed.is_dir() else package.parent / "configs"


def shipped_names() -> list[str]:
    """The shipped runnable configs by name (``mnist``, ``mnist_real``, ...), sections and overlays left out."""
    return sorted(path.stem for path in shipped_configs().glob("*.yaml"))


def resolve_config(value: str) -> Path:
    """The file ``--config value`` reads: ``value`` when it is a file, else the shipped config of that name (with or
    without ``.yaml`` or a leading ``configs/``); a one-line error naming the shipped configs otherwise."""
    path = Path(value).expanduser()
    if path.is_file():
        return path
    name = value.removeprefix("configs/")
    for candidate in (name, f"{name}.yaml"):
        shipped = shipped_configs() / candidate
        if shipped.is_file():
            return shipped
    raise FileNotFoundError(f"config file not found: {value} (neither a file nor a shipped config; shipped: "
                            f"{', '.join(shipped_names())})")


def read_config_file(path: Path) -> dict[str, Any]:
    """The mapping of sections in ``path``; one line naming it when it is no valid YAML or no mapping."""
    try:
        content = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"config file {path} is not valid YAML{where}: "
                         f"{getattr(error, 'problem', None) or error}") from None
    if not isinstance(content, dict):
        what = "empty" if content is None else f"a {type(content).__name__}"
        raise ValueError(f"config file {path} is {what}, not a mapping of sections (generator, sut, model, cases, "
                         "budget, trainer, output)")
    return content


#: a YAML file larger than this is no config that reads a section (readers_of skips it unread)
MAX_CONFIG_BYTES = 1 << 20


def _candidates(target: Path) -> Iterator[Path]:
    """Where a reader of ``target`` may be: every shipped config, and the YAML files of ``target``'s own folder and
    of the folder above it (not their sub-folders: a user's folder may hold a dataset)."""
    shipped = shipped_configs()
    yield from sorted(shipped.rglob("*.yaml")) if shipped.is_dir() else ()
    for folder in (target.parent, target.parent.parent):
        yield from sorted(folder.glob("*.yaml"))


def readers_of(path: Path) -> list[tuple[Path, str]]:
    """The configs that read ``path`` as one of their sections, each with the key that reads it: the shipped configs
    and the YAML files beside ``path`` or one folder up whose top-level value is a path to it."""
    target = path.resolve()
    found: dict[Path, str] = {}
    for candidate in _candidates(target):
        if candidate.resolve() == target or candidate.resolve() in found or not candidate.is_file() \
                or candidate.stat().st_size > MAX_CONFIG_BYTES:
            continue
        try:
            content = yaml.safe_load(candidate.read_text())
        except (yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        for key, value in (content.items() if isinstance(content, dict) else ()):
            if isinstance(value, str) and value.endswith(".yaml") and (candidate.parent / value).resolve() == target:
                found[candidate.resolve()] = f"{key}: {value}"
    return sorted(found.items())


def _shown(path: Path) -> str:
    """``path`` as a user would type it: relative to the current folder when under it, else a shipped file's name
    relative to the shipped configs (what ``--config`` takes)."""
    for root in (Path.cwd(), shipped_configs()):
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def check_not_a_section(files: list[Path], contents: list[dict[str, Any]], flags: list[str]) -> None:
    """Raise :class:`NotAConfig` when the ``--config`` files (and the command line's ``flags``) set neither a
    generator nor a SUT: the first file is then a section (it holds keys no config has, or a config reads it) or an
    overlay; the line says which configs read it, or how to layer it."""
    stated = {flag.removeprefix("--").split("=", 1)[0].split(".", 1)[0] for flag in flags if flag.startswith("--")}
    if not files or any(key in content for content in contents for key in REQUIRED_SECTIONS) \
            or stated & set(REQUIRED_SECTIONS):
        return
    path, content = files[0], contents[0]
    readers = readers_of(path)
    if readers or not set(content) <= FIT_SECTIONS:
        keys = sorted({key for _, key in readers})
        read_by = (f"; read by {', '.join(_shown(reader) for reader, _ in readers)} ({', '.join(keys)}): run one of "
                   "those") if readers else ""
        raise NotAConfig(f"{_shown(path)} is a section of a config, not a config to run{read_by}")
    example = "mnist" if "mnist" in shipped_names() else "CONFIG"
    raise NotAConfig(f"{_shown(path)} is an overlay, not a config to run: it sets no generator or sut; layer it after "
                     f"a config that does (--config {example} --config {_shown(path)})")


def resolve_config_args(args: list[str]) -> list[str]:
    """``args`` with every ``--config VALUE`` (or ``--config=VALUE``) read through :func:`resolve_config` and checked
    (:func:`read_config_file`, :func:`check_not_a_section`): the same arguments, each config a path to a file."""
    out: list[str] = []
    files: list[Path] = []
    items = iter(range(len(args)))
    for i in items:
        flag = args[i]
        if flag == "--config" and i + 1 < len(args):
            value = args[i + 1]
            next(items, None)
        elif flag.startswith("--config="):
            value = flag.split("=", 1)[1]
        else:
            out.append(flag)
            continue
        path = resolve_config(value)
        files.append(path)
        out += ["--config", str(path)]
    contents = [read_config_file(path) for path in files]
    check_not_a_section(files, contents, [a for a in out if a.startswith("--") and a != "--config"])
    return out


__all__ = ["NotAConfig", "check_not_a_section", "read_config_file", "readers_of", "resolve_config",
           "resolve_config_args", "shipped_configs", "shipped_names"]
