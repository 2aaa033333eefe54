"""Content-addressed cache entries: a folder per trained component, keyed by a hash of its training config,
written atomically so that a killed build never leaves a folder that looks valid."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hynea_pl._offline import check_cache

#: Bump when the on-disk layout or the training code changes what a config produces.
FORMAT_VERSION = 1
COMPLETE_MARKER = "COMPLETE"


#: Class paths that entries (``config.json``) and run folders (``config.yaml``) named before a class moved, and where
#: the class lives now (:func:`import_class` and :func:`current_class_paths` read either; new entries and runs name
#: the new path). The zoo's modules were first grouped by domain (``hynea_pl.zoo.mnist``), then the models any
#: labelled-image profile trains moved to :mod:`hynea_pl.zoo.labelled` under names that say no "digit".
#: the labelled-image models: (module, name before, name now)
_LABELLED_CLASSES = (
    ("classifier", "DigitCNN", "SmallCNN"), ("oracle", "OracleNet", "OracleNet"),
    ("embedder", "DigitEmbedder", "ImageEmbedder"),
    ("oracle_sut", "ZooOracle", "ZooOracle"), ("realism", "ZooTypicality", "ZooTypicality"),
    ("acceptance", "ZooAcceptance", "ZooAcceptance"),
)
MOVED_CLASSES: dict[str, str] = {
    "hynea_pl.zoo.scene_attributes.SceneAttributeCNN": "hynea_pl.zoo.scenes.attributes.SceneAttributeCNN",
    **{f"{package}.{module}.{before}": f"hynea_pl.zoo.labelled.{module}.{now}"
       for module, before, now in _LABELLED_CLASSES for package in ("hynea_pl.zoo", "hynea_pl.zoo.mnist")},
}

#: Modules that moved whole: a class path under the old prefix lives under the new one (the baselines installed as
#: the top-level package ``baselines`` before they moved under the package's own name).
MOVED_MODULES: dict[str, str] = {"baselines": "hynea_pl.baselines"}


def current_class_path(class_path: str) -> str:
    """Where the class a config named ``class_path`` lives now (:data:`MOVED_CLASSES`, :data:`MOVED_MODULES`)."""
    for old, new in MOVED_MODULES.items():
        if class_path.startswith(f"{old}."):
            return new + class_path[len(old):]
    return MOVED_CLASSES.get(class_path, class_path)


def zoo_dir() -> Path:
    """The zoo's folder in the cache (a cache root that is no folder is a one-line error naming it)."""
    return check_cache() / "zoo"


def config_key(*parts: Any) -> str:
    """A short stable hash of dataclasses / JSON-able values (and the cache format version)."""
    payload = [FORMAT_VERSION] + [dataclasses.asdict(p) if dataclasses.is_dataclass(p) else p for p in parts]
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def import_class(class_path: str) -> type:
    """The class a cached entry's ``config.json`` names by ``class_path``, also under its path before the move
    (:data:`MOVED_CLASSES`)."""
    from jsonargparse.typing import import_object

    return import_object(current_class_path(class_path))


def missed_record(manifest: Path) -> Path:
    """Where the gates a build of ``manifest``'s components missed are recorded (beside the manifest folder, which a
    missed gate never writes): those entries fail at once with the recorded line instead of being measured again."""
    return manifest.with_name(f"{manifest.name}.missed.json")


def is_complete(path: Path) -> bool:
    """Whether ``path`` is a finished entry (its completion marker is written last)."""
    return (path / COMPLETE_MARKER).is_file()


@contextmanager
def atomic_entry(path: Path) -> Iterator[Path]:
    """Yield a private staging folder; on success mark it complete and move it to ``path`` in one rename.

    An exception (or a killed process) leaves only a ``*.partial-<pid>`` folder that is never loaded and is
    removed by the next build of the same entry. A cache that cannot be written is a one-line error naming it.
    """
    check_cache(write=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{path.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if path.exists() and not is_complete(path):
        shutil.rmtree(path)
    staging = path.with_name(f"{path.name}.partial-{os.getpid()}")
    staging.mkdir()
    try:
        yield staging
        (staging / COMPLETE_MARKER).write_text(json.dumps({"finished": time.time()}))
        if path.exists():  # another process finished the same entry first
            shutil.rmtree(staging)
        else:
            staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def current_class_paths(config_text: str) -> str:
    """A saved config's text (a run folder's ``config.yaml``) with every moved class path (:data:`MOVED_CLASSES`,
    :data:`MOVED_MODULES`) written as it is now, so that a run from before the move still parses (replay, resume)."""
    for old, new in MOVED_CLASSES.items():
        config_text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, config_text)
    for old, new in MOVED_MODULES.items():
        config_text = re.sub(rf"(?<=class_path: ){re.escape(old)}\.", f"{new}.", config_text)
    return config_text
