"""The released zoo: the default profile's trained weights shipped in the package, installed on first use (hashes
checked) instead of trained, kept in step with the code's cache keys, and compared with a rebuild."""

from __future__ import annotations

import json
import shutil

import pytest

from hynea_pl.zoo import build_zoo
from hynea_pl.zoo.registry import BASE_ZOO, cache_folders, extra_names
from hynea_pl.zoo.released import RELEASED, SUMS_FILE, ReleasedZooError, install_released, sha256


def test_the_package_releases_every_folder_of_the_full_zoo_and_its_extras_as_the_code_keys_them(tmp_path,
                                                                                                  monkeypatch):
    """A change of a component's config or training code renames its folder: release the zoo again
    (``python -m hynea_pl zoo release --profile full``) or its first use trains it."""
    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))
    wanted = sorted(folder.name for folder in cache_folders("full", [BASE_ZOO, *extra_names()]))
    assert sorted(p.name for p in RELEASED.iterdir() if p.is_dir()) == wanted
    sums = json.loads((RELEASED / SUMS_FILE).read_text())
    files = sorted(p.relative_to(RELEASED).as_posix() for p in RELEASED.rglob("*") if p.is_file())
    assert sorted(sums) == [f for f in files if f != SUMS_FILE]
    size = sum(p.stat().st_size for p in RELEASED.rglob("*") if p.is_file())
    assert size < 60e6, f"the released zoo is {size / 1e6:.1f} MB"
    for folder in RELEASED.iterdir():  # only weights that passed their gates
        if (folder / "quality.json").is_file():
            gates = json.loads((folder / "quality.json").read_text())["gates"]
            assert all(g["passed"] or not g.get("fatal", True) for g in gates), folder.name


def test_a_fresh_cache_installs_the_released_zoo_without_training(tmp_path, monkeypatch):
    from hynea_pl.zoo import registry

    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))

    def no_training(*args, **kwargs):
        raise AssertionError("a released component was trained")

    monkeypatch.setattr(registry, "_timed_entry", no_training)
    zoo = build_zoo("full", verbose=False)
    assert zoo.quality["gates"][0]["name"] == "sut_accuracy" and zoo.quality["gates"][0]["passed"]
    for folder in cache_folders("full", [BASE_ZOO]):
        for file in (RELEASED / folder.name).rglob("*"):
            if file.is_file():
                assert sha256(folder / file.relative_to(RELEASED / folder.name)) == sha256(file)
    assert zoo.sut() is not None  # its SUT loads from the installed weights


def test_a_damaged_released_file_is_refused_and_installs_nothing(tmp_path):
    source = tmp_path / "released"
    folder = next(p for p in sorted(RELEASED.iterdir()) if p.name.startswith("sut-"))
    shutil.copytree(folder, source / folder.name)
    shutil.copy(RELEASED / SUMS_FILE, source / SUMS_FILE)
    weights = next((source / folder.name).glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    target = tmp_path / "cache" / "zoo" / folder.name
    with pytest.raises(ReleasedZooError, match="does not match its sha256"):
        install_released(target, source)
    assert not target.exists()
    assert install_released(tmp_path / "cache" / "zoo" / "sut-000000000000", source) is False
