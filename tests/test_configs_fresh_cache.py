"""Each MNIST and digit-scene config, as a new user runs it: from an empty cache, offline, its first case starts and
runs two steps with the package's released models, and nothing is trained or gated on the way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from offline_guard import network_blocked

from hynea_pl.cli import main
from hynea_pl.schema import read_records

pytestmark = pytest.mark.slow

#: configs that load the same zoo models through the same code path as one that runs here (the truncation schedules
#: as ``mnist_truncation``; GIFTbench on the scenes as ``mnist_giftbench`` with the scenes' models of
#: ``scenes_attributes`` / ``scenes_detection``): ``test_configs_released`` resolves their models from the release on
#: an empty cache, ``test_scene_configs`` runs the scene ones end to end, ``test_truncation`` the schedules, and
#: ``test_config_files`` parses them all
SAME_PATH = {"mnist_truncation_adaptive", "mnist_truncation_stylemix", "scenes_attributes_giftbench",
             "scenes_detection_giftbench"}
#: ``fit`` runs: every other MNIST and scene config (the overlays, ``overlays/hynea_paper.yaml`` and
#: ``overlays/hynea_views.yaml``, and ``custom.yaml --profile full`` name no model of their own: their models are those
#: of ``mnist.yaml``, and ``test_configs_released`` resolves them) and the arguments each needs besides
RUNS = [
    *[([str(config)], []) for config in sorted(Path("configs").glob("mnist*.yaml")) if config.stem not in SAME_PATH],
    *[([str(config)], []) for config in sorted(Path("configs").glob("scenes_*.yaml")) if config.stem not in SAME_PATH],
]


def run_id(run: tuple[list[str], list[str]]) -> str:
    return "+".join(Path(config).stem for config in run[0])


@pytest.fixture(scope="module")
def empty_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One empty cache for every config, in which training or measuring a zoo model fails the test."""
    from hynea_pl.zoo import registry

    cache = tmp_path_factory.mktemp("fresh_cache")

    def forbidden(*args, **kwargs):
        raise AssertionError("a zoo model was trained or gated on a fresh machine")

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYNEA_PL_CACHE", str(cache))
        patch.setattr(registry, "_timed_entry", forbidden)
        patch.setattr(registry, "_measure", forbidden)
        yield cache


def first_class(config: str) -> int:
    return (yaml.safe_load(Path(config).read_text()).get("cases") or {}).get("classes", [0])[0]


@pytest.mark.parametrize("run", RUNS, ids=run_id)
def test_the_config_starts_its_first_case_from_an_empty_cache(run, empty_cache, tmp_path, capsys):
    configs, extra = run
    text = "".join(Path(config).read_text() for config in configs)
    hynea = "HyNeACase" in text or "sections/hynea.yaml" in text
    args = ["fit", *[a for config in configs for a in ("--config", config)], *extra,
            "--cases.n_per_class", "1", "--cases.classes", f"[{first_class(configs[0])}]",
            "--trainer.max_steps", "2", *(["--model.init_args.retries.attempts", "1"] if hynea else []),
            "--output.root", str(tmp_path)]
    with network_blocked():
        assert main(args) == 0, capsys.readouterr().err[-2000:]
    printed = capsys.readouterr()
    assert "zoo: training" not in printed.out + printed.err  # no zoo model trained (nor the guard above hit)
    (records,) = list(tmp_path.glob("*/records.jsonl"))
    (record,) = read_records(records)
    assert record.error is None, record.error
    assert record.sut_evals >= 1
