"""The files ``fit --config`` reads (hynea_pl.campaign.config_files): every file under configs/ is a config that
resolves or a section / overlay that says so in one line; shipped configs are found by name from any folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hynea_pl.campaign.config_files import readers_of, shipped_configs
from hynea_pl.cli import main

ROOT = Path(__file__).resolve().parents[1]
CONFIG_FILES = sorted((ROOT / "configs").rglob("*.yaml"))
#: the folders of files that are no config on their own, and what each says when run alone
NOT_CONFIGS = {"sections": "is a section of a config, not a config to run",
               "overlays": "is an overlay, not a config to run"}


def print_config(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``fit ARGS --print_config`` in this process: its exit code, stdout and stderr."""
    try:
        code = main(["fit", *args, "--print_config"])
    except SystemExit as stop:  # jsonargparse exits after printing
        code = stop.code or 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("config", CONFIG_FILES, ids=lambda p: str(p.relative_to(ROOT / "configs")))
def test_every_file_under_configs_resolves_or_says_it_is_a_section(config, capsys):
    code, out, err = print_config(["--config", str(config)], capsys)
    kind = config.parent.name if config.parent != ROOT / "configs" else None
    if kind is None:
        assert code == 0, err
        parsed = yaml.safe_load(out)
        assert parsed["generator"]["class_path"] and parsed["sut"]["class_path"] and parsed["model"]["class_path"]
    else:
        assert code == 2 and not out
        assert len(err.strip().splitlines()) == 1 and NOT_CONFIGS[kind] in err, err


def test_a_section_names_the_configs_that_read_it(capsys):
    code, _, err = print_config(["--config", "configs/sections/scenes_oracle.yaml"], capsys)
    assert code == 2
    for reader in ("scenes_attributes.yaml", "scenes_detection.yaml", "scenes_detection_giftbench.yaml"):
        assert reader in err
    assert "oracle: sections/scenes_oracle.yaml" in err
    assert {p.name for p, _ in readers_of(shipped_configs() / "sections" / "hynea.yaml")} == {
        "mnist.yaml", "mnist_real.yaml", "custom.yaml"}


def test_an_overlay_layered_after_a_config_resolves(capsys):
    code, out, err = print_config(["--config", "mnist", "--config", "overlays/hynea_paper"], capsys)
    assert code == 0, err
    model = yaml.safe_load(out)["model"]["init_args"]
    assert model["steering"]["model"] is None and model["acceptance"]["test"] is None


def test_a_shipped_config_is_found_by_name_from_any_folder(tmp_path, monkeypatch, capsys):
    _, by_path, _ = print_config(["--config", str(ROOT / "configs" / "mnist.yaml")], capsys)
    monkeypatch.chdir(tmp_path)
    for name in ("mnist", "mnist.yaml", "configs/mnist.yaml"):
        code, out, err = print_config(["--config", name], capsys)
        assert code == 0, err
        assert out == by_path
    code, _, err = print_config(["--config", "mnsit"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "config file not found: mnsit" in err and "mnist_real" in err


def test_a_file_of_that_name_in_the_current_folder_comes_before_the_shipped_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mnist.yaml").write_text((ROOT / "configs" / "mnist.yaml").read_text()
                                         .replace("config: sections/hynea.yaml", "config: mine.yaml"))
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"model": {"class_path": "hynea_pl.methods.HyNeACase"}}))
    code, out, err = print_config(["--config", "mnist.yaml"], capsys)
    assert code == 0, err
    assert (yaml.safe_load(out)["model"]["init_args"].get("steering") or {}).get("model") is None  # its own method


def test_a_users_own_section_is_recognised(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "method.yaml").write_text(yaml.safe_dump({"model": {"class_path": "hynea_pl.methods.HyNeACase"}}))
    (tmp_path / "run.yaml").write_text((ROOT / "configs" / "mnist.yaml").read_text()
                                       .replace("config: sections/hynea.yaml", "config: method.yaml"))
    code, _, err = print_config(["--config", "method.yaml"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "method.yaml is a section of a config" in err and "read by run.yaml (config: method.yaml)" in err
