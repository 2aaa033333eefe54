"""The digit-scene configs (issue 17) end to end on the tiny scene zoo: HyNeA and GIFTbench on the attribute and the
detection task, each through ``python -m hynea_pl fit``, then ``compare`` over them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tiny_zoo import install

from hynea_pl.cli import main
from hynea_pl.schema import read_records

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scene_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cache with the fixed tiny scene components and MNIST zoo (its judges read scenes over windows), and the tiny
    detector, trained here (it is not kept: :mod:`tiny_zoo`)."""
    cache = tmp_path_factory.mktemp("scene_cache")
    install(cache)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HYNEA_PL_CACHE", str(cache))
        from offline_guard import network_blocked

        from hynea_pl.zoo.registry import build_component

        with network_blocked():
            build_component("tiny", "detector_sut", verbose=False)
        yield str(cache)


def tiny_oracle(root: Path) -> Path:
    """The shipped scene oracle (configs/sections/scenes_oracle.yaml) on the tiny zoos: the tiny attribute oracle and
    the tiny
    MNIST judges read over windows."""
    oracle = yaml.safe_load(Path("configs/sections/scenes_oracle.yaml").read_text())
    cnn, windows = oracle["init_args"]["model"]["init_args"]["judges"]
    cnn["init_args"]["weights"] = "zoo://tiny/attribute_oracle"
    cnn["init_args"]["model"]["init_args"]["widths"] = [4, 8]
    windows["init_args"]["reader"]["init_args"]["profile"] = "tiny"
    path = root / "tiny_scenes_oracle.yaml"
    path.write_text(yaml.safe_dump(oracle))
    return path


def tiny_scene_args(config: str, root: Path, *extra: str) -> list[str]:
    """A shipped scene config pointed at the tiny scene zoo (its models' tiny widths), one case, 2 sampling steps."""
    root.mkdir(parents=True, exist_ok=True)
    args = ["fit", "--config", config,
            "--generator.init_args.pretrained", "zoo://tiny/layout_scenes",
            "--generator.init_args.num_inference_steps", "2",
            "--oracle", str(tiny_oracle(root)), "--realism.init_args.profile", "tiny",
            "--cases.n_per_class", "1", "--cases.validate_origins", "false",  # tiny models recognise nothing
            "--output.root", str(root)]
    if "attributes" in config:
        args += ["--sut.init_args.weights", "zoo://tiny/attribute_sut",
                 "--sut.init_args.model.init_args.channels", "[4, 8]"]
    else:
        args += ["--sut.init_args.model", "zoo://tiny/detector_sut", "--cases.classes", "[3]"]
    if "giftbench" not in config:  # HyNeA steers with the other task's SUT (differential reference)
        if "attributes" in config:
            args += ["--model.init_args.steering.model.init_args.model", "zoo://tiny/detector_sut"]
        else:
            args += ["--model.init_args.steering.model.init_args.weights", "zoo://tiny/attribute_sut",
                     "--model.init_args.steering.model.init_args.model.init_args.channels", "[4, 8]"]
    return [*args, *extra]


def test_scene_configs_run_hynea_and_giftbench_on_both_tasks_and_compare_them(scene_cache, tmp_path, monkeypatch,
                                                                              capsys):
    monkeypatch.setenv("HYNEA_PL_CACHE", scene_cache)
    runs = tmp_path / "runs"
    plan = [
        ("configs/scenes_attributes.yaml", "scenes_attr3_hynea", ("--trainer.max_steps", "2")),
        ("configs/scenes_attributes_giftbench.yaml", "scenes_attr3_giftbench-low-1e-4", ("--budget.max_evals", "40")),
        ("configs/scenes_detection.yaml", "scenes_det_hynea", ("--trainer.max_steps", "2")),
        ("configs/scenes_detection_giftbench.yaml", "scenes_det_giftbench-low-1e-4", ("--budget.max_evals", "40")),
    ]
    for config, name, extra in plan:
        assert main(tiny_scene_args(config, runs, *extra)) == 0, config
        (record,) = read_records(runs / name / "records.jsonl")
        assert record.error is None, record.error
        assert record.task == ("binary" if "attributes" in config else "detection")
        assert record.verdict in ("valid_failure", "semantic_change", "no_flip")  # judged by the scene oracle
        assert record.oracle_origin_label in (0, 1)
        assert 1 <= record.sut_evals <= (2 if "giftbench" not in config else 40)
        assert (runs / name / record.result_image).is_file() and (runs / name / "grid.png").is_file()
        # the scene's layout is recorded: the one its seed draws, with the origin's digit boxes inside their squares
        layout = record.layout
        assert layout is not None and 1 <= len(layout["classes"]) == len(layout["squares"]) == len(layout["boxes"]) <= 3
        for (x0, y0, x1, y1), (x, y, side) in zip(layout["boxes"], layout["squares"], strict=True):
            assert x <= x0 < x1 <= x + side and y <= y0 < y1 <= y + side
        summary = json.loads((runs / name / "summary.json").read_text())
        if "giftbench" not in config:  # the reference ran and its verdict in the case's terms is recorded
            assert isinstance(record.diagnostics["reference_kept"], bool)
        if record.task == "detection":
            assert record.target == 3 and record.confidence_reduction is not None
            assert summary["confidence_reduction"] == pytest.approx(record.confidence_reduction, abs=1e-6)
            assert summary["escape_ratio"] is None
            assert len(record.origin_boxes) == 5 and len(record.result_boxes) == 5
            assert all(len(box) == 6 and 0 <= box[5] <= 1 for box in record.origin_boxes)
        else:
            assert record.target == 3 and record.origin_boxes is None
    # compare: one row per method and task, realism reported unavailable (no digit-zoo features for scenes)
    out = tmp_path / "compare"
    assert main(["compare", str(runs / "scenes_attr3_hynea"), str(runs / "scenes_attr3_giftbench-low-1e-4"),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "hynea" in printed and "giftbench-low-1e-4" in printed
    csv = (out / "compare.csv").read_text().splitlines()
    assert len(csv) == 3 and "valid_failure_rate" in csv[0]
    # detection: the compare table carries the mean confidence reduction (eq. 15) of each run
    out = tmp_path / "compare_det"
    assert main(["compare", str(runs / "scenes_det_hynea"), str(runs / "scenes_det_giftbench-low-1e-4"),
                 "--out", str(out)]) == 0
    table = pd.read_csv(out / "compare.csv")
    assert table["confidence_reduction"].notna().all() and table["escape_ratio"].isna().all()
