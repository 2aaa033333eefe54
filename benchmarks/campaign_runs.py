"""What the sweep scripts share: run one campaign through ``python -m hynea_pl fit`` and read its summary."""

from __future__ import annotations

from pathlib import Path

from hynea_pl.campaign.summary import read_summary
from hynea_pl.cli import main


def fit_summary(name: str, overrides: list[str], out: Path, config: str = "configs/mnist.yaml") -> dict:
    """Run ``fit --config config *overrides`` into ``out/name`` and return its ``summary.json``."""
    code = main(["fit", "--config", config, *overrides, "--output.root", str(out), "--output.name", name])
    if code != 0:
        raise SystemExit(f"sweep run {name} failed with exit code {code}")
    return read_summary(out / name / "summary.json")
