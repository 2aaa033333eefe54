"""The tiny zoo the tests use, trained once and kept in ``tests/data/tiny_zoo/`` (about 2.5 MB).

Training amplifies the way a CPU rounds: a tiny zoo trained at test time on an AVX-512 machine is not the one trained
on an AVX2 machine, and a test that needs its SUT to flip or its golden records to match would hold only where the
zoo was trained. So the tests copy these fixed cache entries into a temporary cache (:func:`install`) and never
train them; ``tests/test_zoo.py`` still trains the tiny profile from scratch and checks its gates loosely.

The YOLO detector (``detector_sut``, 6 MB) is not kept: the tests that use it train it and assert nothing that
depends on its weights. Regenerate the kept entries (after a change to the tiny profile, a component's training
code or the cache format; the tests name the missing folder) with::

    python tests/tiny_zoo.py --write

Only the folders of a changed config are trained again (a kept folder is never rebuilt, as in any cache). New weights
change the golden records: write them again (``python tests/records_regression.py --write tests/golden``) and check
them on a second kernel path (e.g. ``ATEN_CPU_CAPABILITY=default``) before committing both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

COMMITTED = Path(__file__).parent / "data" / "tiny_zoo"
#: the tiny zoo's components kept in :data:`COMMITTED`: the MNIST base zoo (the bundle ``zoo``), the StyleGAN, the
#: scene attribute SUT and oracle, and the layout scene generator
KEPT = ("zoo", "stylegan", "attribute_sut", "attribute_oracle", "layout_scenes")


class StaleTinyZoo(RuntimeError):
    """The committed tiny zoo has no folder for a component as the code keys it now."""


def folders(names: Iterable[str]) -> list[str]:
    """The cache folders (names inside ``zoo/``) of the tiny profile's components ``names``: entries and manifests
    (a bundle: its members' entries and its manifest)."""
    from hynea_pl.zoo.registry import cache_folders

    return [folder.name for folder in cache_folders("tiny", names)]


def install(cache: Path | str, names: Iterable[str] = KEPT) -> None:
    """Copy the kept entries of ``names`` into the cache folder ``cache`` (``cache/zoo/...``), so that loading them
    trains nothing. Raises :class:`StaleTinyZoo` naming the first folder the committed zoo lacks."""
    names = list(names)
    unknown = sorted(set(names) - set(KEPT))
    if unknown:
        raise ValueError(f"the committed tiny zoo keeps {list(KEPT)}, not {unknown}")
    previous = os.environ.get("HYNEA_PL_CACHE")
    os.environ["HYNEA_PL_CACHE"] = str(cache)  # component_paths reads the cache root
    try:
        wanted = folders(names)
    finally:
        if previous is None:
            os.environ.pop("HYNEA_PL_CACHE", None)
        else:
            os.environ["HYNEA_PL_CACHE"] = previous
    target = Path(cache) / "zoo"
    target.mkdir(parents=True, exist_ok=True)
    for folder in wanted:
        source = COMMITTED / "zoo" / folder
        if not source.is_dir():
            raise StaleTinyZoo(f"the committed tiny zoo has no {folder} (the tiny profile, a component's training "
                               f"code or the cache format changed): run python tests/tiny_zoo.py --write")
        if not (target / folder).exists():
            shutil.copytree(source, target / folder)


def write(destination: Path = COMMITTED) -> list[str]:
    """Build what ``destination`` lacks of the tiny profile's kept components, in a cache that starts from the folders
    it keeps (network blocked), and make ``destination`` hold exactly their folders; returns the folder names.

    Like any cache entry, a kept folder is named by its config's hash and never rebuilt: only the folders of a
    changed config (new names) are trained or measured, and a folder no longer named is removed."""
    from offline_guard import network_blocked

    with tempfile.TemporaryDirectory() as cache:
        if (destination / "zoo").is_dir():
            shutil.copytree(destination / "zoo", Path(cache) / "zoo")
        os.environ["HYNEA_PL_CACHE"] = cache
        from hynea_pl.zoo.registry import build_component

        with network_blocked():
            for name in KEPT:
                build_component("tiny", name, verbose=False)
        kept = folders(KEPT)
        for stale in (destination / "zoo").glob("*") if (destination / "zoo").is_dir() else ():
            if stale.name not in kept:
                shutil.rmtree(stale)
        for folder in kept:
            if not (destination / "zoo" / folder).exists():
                shutil.copytree(Path(cache) / "zoo" / folder, destination / "zoo" / folder)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", required=True,
                        help=f"train the kept components and replace {COMMITTED}")
    parser.parse_args(argv)
    for folder in write():
        print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
