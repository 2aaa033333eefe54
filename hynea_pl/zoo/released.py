"""The zoo's released weights, shipped in the package as a model hub ships them: the default profile's trained base
zoo (the SUT, the embedder, the autoencoder, the LDM, the steering model and the judges, with their configs and the
bundle's quality manifest), installed into the cache on first use instead of trained.

Each released folder is a cache folder under the name the code keys it by (:mod:`hynea_pl.zoo.registry`): a change
of a component's config or training code changes its key, and that component is trained as before. Every file is
checked against its sha256 in :data:`SUMS_FILE` when it is installed. What the zoo derives at load (the k-NN judge's
reference, the realism reference, the acceptance statistics) is not shipped.

Maintainers release a zoo version with ``python -m hynea_pl zoo release --profile full`` after building it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from rich.table import Table

from hynea_pl.zoo.cache import COMPLETE_MARKER, atomic_entry, missed_record

#: Where the released cache folders live in the package.
RELEASED = Path(__file__).parent / "released"
#: ``{"<folder>/<file>": sha256}`` of every released file.
SUMS_FILE = "SHA256SUMS.json"


class ReleasedZooError(RuntimeError):
    """A released file that does not match its recorded hash (a damaged install)."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install_released(path: Path, source: Path | None = None) -> bool:
    """Install the released copy of the cache folder ``path`` (an entry or a quality manifest) when ``source``
    (default: :data:`RELEASED`) has one: its files copied into the cache, each checked against its sha256 first;
    ``False`` when none is released."""
    source = source or RELEASED
    released = source / path.name
    if not released.is_dir():
        return False
    sums = json.loads((source / SUMS_FILE).read_text())
    with atomic_entry(path) as staging:
        for file in sorted(released.rglob("*")):
            if not file.is_file():
                continue
            name = file.relative_to(source).as_posix()
            if sums.get(name) != sha256(file):
                raise ReleasedZooError(f"released zoo file {file} does not match its sha256 in {source / SUMS_FILE}: "
                                       "reinstall hynea_pl")
            target = staging / file.relative_to(released)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, target)
    return True


def matches_released(path: Path, source: Path | None = None) -> bool:
    """Whether the cache folder ``path`` holds the released copy of itself, file for file (its sha256s): a folder
    trained here under the released name (``zoo build --rebuild``) does not."""
    source = source or RELEASED
    released = source / path.name
    if not released.is_dir():
        return False
    sums = json.loads((source / SUMS_FILE).read_text())
    for name, digest in sums.items():
        folder, _, file = name.partition("/")
        if folder == path.name and (not (path / file).is_file() or sha256(path / file) != digest):
            return False
    return True


def release(folders: list[Path], destination: Path | None = None) -> list[str]:
    """Make ``destination`` (default: :data:`RELEASED`) hold exactly the cache folders ``folders`` (complete entries
    and manifests) and their :data:`SUMS_FILE`; returns the released folder names."""
    destination = destination or RELEASED
    if destination.exists():
        shutil.rmtree(destination)
    destination.mkdir(parents=True)
    sums = {}
    for folder in folders:
        for file in sorted(folder.rglob("*")):
            if file.is_file() and file.name != COMPLETE_MARKER:
                target = destination / folder.name / file.relative_to(folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, target)
                sums[target.relative_to(destination).as_posix()] = sha256(target)
    (destination / SUMS_FILE).write_text(json.dumps(sums, indent=1, sort_keys=True) + "\n")
    return [folder.name for folder in folders]


def discard(folders: list[Path]) -> None:
    """Remove the cache folders ``folders`` and their missed-gate records (a rebuild trains them again)."""
    for folder in folders:
        if folder.exists():
            shutil.rmtree(folder)
        missed_record(folder).unlink(missing_ok=True)


def compare_with_released(manifest: Path, source: Path | None = None) -> Table:
    """The gates of a built profile's quality ``manifest`` beside the released zoo's (the same folder name in
    ``source``, default :data:`RELEASED`): value, threshold and whether each passes; a gate the two zoos measure alike
    differs only by its training's noise."""
    source = source or RELEASED
    rebuilt = json.loads((manifest / "quality.json").read_text())["gates"]
    shipped_file = source / manifest.name / "quality.json"
    shipped = {g["name"]: g for g in json.loads(shipped_file.read_text())["gates"]} if shipped_file.is_file() else {}
    table = Table(title=f"{manifest.name}: rebuilt vs released" if shipped else f"{manifest.name}: no released zoo")
    for column in ("gate", "threshold", "released", "rebuilt", "difference", "both pass"):
        table.add_column(column, justify="left" if column == "gate" else "right")
    for gate in rebuilt:
        old = shipped.get(gate["name"], {})
        value, before = gate.get("value"), old.get("value")
        numbers = isinstance(value, (int, float)) and isinstance(before, (int, float))
        both = "yes" if gate["passed"] and old.get("passed") else "no"
        table.add_row(gate["name"], _text(gate.get("threshold")), _text(before), _text(value),
                      _text(value - before) if numbers else "-", both)
    return table


def _text(value: object) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


__all__ = ["RELEASED", "SUMS_FILE", "ReleasedZooError", "compare_with_released", "discard", "install_released",
           "matches_released", "release", "sha256"]
