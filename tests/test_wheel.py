"""The wheel holds what a user outside the checkout needs, under the package's own name: every package, the
baselines as ``hynea_pl.baselines``, the shipped configs, the released zoo; and no top-level name but ``hynea_pl``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The file names in a wheel built from the checkout (``pip wheel``, no dependencies, no build isolation)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)], check=True, capture_output=True)
    (wheel,) = out.glob("hynea_pl-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_wheel_installs_one_top_level_name(wheel_names):
    tops = {name.split("/")[0] for name in wheel_names}
    assert tops == {"hynea_pl", next(t for t in tops if t.endswith(".dist-info"))}, tops
    assert not any(name.startswith("baselines/") for name in wheel_names)


def test_the_wheel_holds_every_package_and_the_baselines_under_the_package(wheel_names):
    packages = {path.parent.relative_to(ROOT).as_posix() for path in (ROOT / "hynea_pl").rglob("__init__.py")}
    for package in packages:
        assert f"{package}/__init__.py" in wheel_names, f"{package} is missing from pyproject.toml's packages"
    for module in (ROOT / "baselines").glob("*.py"):
        assert f"hynea_pl/baselines/{module.name}" in wheel_names


def test_the_wheel_holds_the_shipped_configs_and_the_released_zoo(wheel_names):
    for config in (ROOT / "configs").rglob("*.yaml"):
        assert f"hynea_pl/configs/{config.relative_to(ROOT / 'configs').as_posix()}" in wheel_names
    released = [p for p in (ROOT / "hynea_pl" / "zoo" / "released").rglob("*") if p.is_file()]
    assert released and all(p.relative_to(ROOT).as_posix() in wheel_names for p in released)
