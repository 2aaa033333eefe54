"""Tiny runs of several methods through ``python -m hynea_pl fit`` on the tiny zoo (shared by the tests that fit
methods and then compare or report them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from hynea_pl.cli import main

#: method -> its shipped config and the arguments that select the variant.
CONFIGS: dict[str, tuple[str, ...]] = {
    "hynea": ("configs/mnist.yaml", "--model.init_args.steering.model.init_args.profile", "tiny",
              "--model.init_args.acceptance.test.init_args.profile", "tiny"),
    "giftbench-low-1e-4": ("configs/mnist_giftbench.yaml",),
    "giftbench-high-1e-3": ("configs/mnist_giftbench.yaml", "--model.init_args.config", "high"),
    "sinvad": ("configs/mnist_sinvad.yaml",),
}


def tiny_fit_args(method: str, root: Path, budget: int, max_steps: int = 100,
                  classes: Sequence[int] = (1, 7), sut: Sequence[str] = ()) -> list[str]:
    """A method's shipped config pointed at the tiny zoo: one case for each of ``classes`` (default 1 and 7); ``sut``:
    arguments that replace the tiny zoo's SUT (e.g. :data:`tiny_components.DIGIT_CENTROIDS`)."""
    config, *method_args = CONFIGS[method]
    return [
        "fit", "--config", config, *method_args,
        "--generator.init_args.pretrained", "zoo://tiny/ldm",
        "--generator.init_args.num_inference_steps", "2",
        "--sut.init_args.weights", "zoo://tiny/sut",
        "--sut.init_args.model.init_args.channels", "[8, 16]",
        "--sut.init_args.model.init_args.hidden", "32",
        "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
        "--cases.classes", json.dumps(list(classes)), "--cases.n_per_class", "1",
        "--cases.validate_origins", "false",  # the tiny zoo's random digits are not recognisable
        "--trainer.max_steps", str(max_steps), "--budget.max_evals", str(budget),
        "--output.root", str(root), *sut,
    ]


def records(run: Path) -> list[dict]:
    """The raw JSON records of a run folder."""
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def fit_runs(cache: str, root: Path, runs: Iterable[tuple[str, Sequence[str]]], budget: int = 60,
             hynea_steps: int = 3) -> None:
    """Fit ``(method, extra fit arguments)`` runs into ``root`` with ``HYNEA_PL_CACHE`` set to ``cache``; HyNeA
    gets ``hynea_steps`` steps, the population searches as many generations as the budget pays for."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYNEA_PL_CACHE", cache)
        for method, extra in runs:
            max_steps = hynea_steps if method == "hynea" else 100
            assert main([*tiny_fit_args(method, root, budget=budget, max_steps=max_steps), *extra]) == 0
