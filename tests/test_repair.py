"""``python -m hynea_pl repair``: the valid failures of runs fine-tune the SUT (and a control, as many real images),
on the tiny zoo; bad input is one line and writes nothing; a second call reuses what exists."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from safetensors.torch import load_file

from hynea_pl.cli import main
from hynea_pl.repair import collect_failures
from hynea_pl.repair.command import build_sut, repair
from hynea_pl.schema import CaseRecord, write_records

TINY_SUT = {"class_path": "hynea_pl.suts.ClassifierSUT",
            "init_args": {"model": {"class_path": "hynea_pl.zoo.labelled.classifier.SmallCNN",
                                    "init_args": {"channels": [8, 16], "hidden": 32, "num_classes": 10}},
                          "weights": "zoo://tiny/sut",
                          "preprocess": {"size": 32, "channels": 1, "mean": [0.5], "std": [0.5]}}}
#: small fine-tuning settings for the tiny zoo
SMALL = {"profile": "tiny", "steps": 4, "batch_size": 8, "extra_per_batch": 2, "val_size": 40}


def make_run(root: Path, name: str, verdicts: list[str], seed: int = 1000, classes: int = 10) -> Path:
    """A run folder of ``cases.seed = seed`` with a case per verdict (origin class = its index), grey PNGs saved as
    RGB, as the campaigns save them."""
    run = root / name
    (run / "cases").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"cases": {"seed": seed}}))
    rng = np.random.default_rng(seed)
    records = []
    for index, verdict in enumerate(verdicts):
        path = f"cases/c{index}-0_result.png"
        grey = rng.integers(0, 255, (32, 32), dtype=np.uint8)
        Image.fromarray(np.stack([grey] * 3, -1)).save(run / path)
        records.append(CaseRecord(method="hynea", run=name, task="multiclass", case_id=f"c{index}-0", seed=index,
                                  origin_class=index, flipped=True, verdict=verdict, result_image=path,
                                  origin_pred=[0.0] * classes))
    write_records(run / "records.jsonl", records)
    return run


@pytest.fixture
def sut_file(tmp_path) -> Path:
    path = tmp_path / "tiny_sut.yaml"
    path.write_text(yaml.safe_dump(TINY_SUT))
    return path


def test_failures_are_the_valid_ones_labelled_with_their_origin_class(tmp_path):
    run = make_run(tmp_path, "a", ["valid_failure", "semantic_change", "valid_failure"])
    failures = collect_failures([run])
    assert failures.labels.tolist() == [0, 2] and failures.sources == ["a/c0-0", "a/c2-0"]
    assert failures.images.shape == (2, 3, 32, 32) and failures.with_channels(1).images.shape == (2, 1, 32, 32)
    assert failures.seeds == [1000] and failures.num_classes == 10


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, tiny_zoo, sut_file, capsys):
    good = make_run(tmp_path, "good", ["valid_failure"] * 3)
    none = make_run(tmp_path, "none", ["semantic_change", "no_flip"])
    other = make_run(tmp_path, "other", ["valid_failure"], classes=5)
    out = tmp_path / "out"
    cases = [
        ([str(good), str(none)], "has no valid failure"),
        ([str(good), str(other)], "different class counts"),
        ([str(other)], "the SUT has 10 classes and the runs' SUT 5"),
        ([str(tmp_path / "nowhere")], "is not a run folder"),
    ]
    for runs, message in cases:
        assert main(["repair", *runs, "--sut", str(sut_file), "--out", str(out), "--eval-seeds"]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()
    assert main(["repair", str(good), "--sut", str(sut_file), "--out", str(out), "--eval-seeds", "1000"]) == 2
    assert "case seeds [1000] gave failures" in capsys.readouterr().err and not out.exists()


def test_the_repair_fine_tunes_the_sut_and_a_control_and_a_second_call_reuses_them(tmp_path, tiny_zoo, sut_file,
                                                                                 capsys):
    run = make_run(tmp_path, "run", ["valid_failure"] * 4)
    out = tmp_path / "out"
    table = repair([run], out, sut=str(sut_file), eval_seeds=(), **SMALL)
    assert list(table["model"]) == ["original", "repaired", "control"]
    assert all(0 <= float(a) <= 1 for a in table["held-out accuracy"])
    original = build_sut(TINY_SUT).model.state_dict()
    for name in ("repaired", "control"):
        training = json.loads((out / name / "training.json").read_text())
        assert training["extra_images"] == 4 and training["steps_run"] == SMALL["steps"]
        assert training["held_out_accuracy"][0]["alpha"] == 0 and 0 <= training["alpha"] <= 1
        config = yaml.safe_load((out / name / "sut.yaml").read_text())
        assert config["init_args"]["weights"] == str((out / name / "model.safetensors").resolve())
        weights = load_file(out / name / "model.safetensors")
        loaded = build_sut(config).model.state_dict()  # fit --sut DIR/<name>/sut.yaml tests these weights
        assert all(torch.equal(loaded[k], weights[k]) for k in weights)
        moved = any(not torch.equal(weights[k], original[k]) for k in weights)
        assert moved == (training["alpha"] > 0)
    assert (out / "repair.md").read_text().startswith("| model |")
    stamps = {name: (out / name / "model.safetensors").stat().st_mtime_ns for name in ("repaired", "control")}
    capsys.readouterr()
    repair([run], out, sut=str(sut_file), eval_seeds=(), **SMALL)  # the same arguments: nothing trained again
    assert "exists, reused" in capsys.readouterr().out
    assert stamps == {name: (out / name / "model.safetensors").stat().st_mtime_ns for name in stamps}
    with pytest.raises(ValueError, match="already holds a repair of other arguments"):
        repair([run], out, sut=str(sut_file), eval_seeds=(), **{**SMALL, "steps": 6})
    with pytest.raises(ValueError, match="would evaluate the repair"):  # another seed may be added, not this one
        repair([run], out, sut=str(sut_file), eval_seeds=(1000,), **SMALL)


@pytest.mark.slow
def test_one_command_gives_the_table_with_a_campaign_against_each_model(tmp_path, tiny_zoo, sut_file):
    from method_runs import tiny_fit_args

    run = make_run(tmp_path, "run", ["valid_failure"] * 3)
    args = tiny_fit_args("hynea", tmp_path / "unused", budget=6, max_steps=2, classes=(1,))
    keep = [a for i, a in enumerate(args[3:], 3)  # its config is eval_config; its SUT is each model's file
            if not a.startswith(("--sut", "--output")) and not args[i - 1].startswith(("--sut", "--output"))]
    out = tmp_path / "out"
    table = repair([run], out, sut=str(sut_file), eval_seeds=(5, 6), eval_args=tuple(keep), jobs=2, **SMALL)
    assert list(table["seed 5: cases"]) == [1, 1, 1] and list(table["seed 6: cases"]) == [1, 1, 1]
    assert all(0 <= f <= 1 for f in table["seed 5: flip"])
    for name in ("original", "repaired", "control"):
        config = yaml.safe_load((out / "eval" / f"{name}-seed5" / "config.yaml").read_text())
        assert config["sut"]["init_args"]["weights"] == yaml.safe_load(
            (out / name / "sut.yaml").read_text())["init_args"]["weights"]
        assert config["cases"]["seed"] == 5
    assert "campaigns (configs/mnist.yaml) from case seeds [5, 6]" in (out / "repair.md").read_text()
    assert all((out / "eval" / f"{name}-seed6" / "records.jsonl").is_file() for name in ("original", "repaired",
                                                                                       "control"))


def test_the_interpolation_keeps_the_largest_share_of_the_fine_tuning_within_the_bound():
    from types import SimpleNamespace

    from hynea_pl.repair.module import WeightInterpolation

    model = torch.nn.Linear(1, 1, bias=False)
    module = SimpleNamespace(sut=SimpleNamespace(model=model),
                             held_out_accuracy=lambda: 0.9 - 0.001 * model.weight.item())  # forgets as it moves
    for tolerance, alpha in [(0.0055, 0.5), (0.0095, 0.9), (0.0005, 0.0)]:
        keep = WeightInterpolation(tolerance=tolerance)
        model.weight.data.fill_(0.0)
        keep.on_fit_start(None, module)
        model.weight.data.fill_(10.0)  # the fine-tuning
        keep.on_fit_end(None, module)
        assert keep.alpha == alpha and model.weight.item() == pytest.approx(10 * alpha)
        assert keep.history[0] == (0.0, pytest.approx(0.9)) and all(a >= alpha for a, _ in keep.history[1:])


#: a bad value of each argument (``{tmp}``: the test's folder), the argument its one line names and what it says
BAD_ARGUMENTS = [
    ("steps", ["--steps", "-5"], "--steps", "a positive integer"),
    ("steps-zero", ["--steps", "0"], "--steps", "a positive integer"),
    ("steps-not-int", ["--steps", "1.5"], "--steps", "invalid int value"),
    ("jobs", ["--jobs", "0"], "--jobs", "a positive integer"),
    ("profile", ["--profile", "nosuch"], "--profile", "a zoo profile, one of ["),
    ("eval-config-missing", ["--eval-config", "{tmp}/nope.yaml"], "--eval-config", "no such file or shipped config"),
    ("eval-config-not-mapping", ["--eval-config", "{tmp}/list.yaml"], "--eval-config", "not a mapping"),
    ("sut-missing", ["--sut", "{tmp}/nope.yaml"], "--sut", "an existing SUT file"),
    ("sut-without-sut", ["--sut", "{tmp}/list.yaml"], "--sut", "it holds none"),
    ("out-file", ["--out", "{tmp}/a_file"], "--out", "it is a file"),
    ("out-not-empty", ["--out", "{tmp}/full"], "--out", "it is not empty and holds no repair"),
    ("out-other-repair", ["--out", "{tmp}/other"], "--out", "already holds a repair of other arguments"),
    ("eval-seeds-of-failures", ["--eval-seeds", "1000"], "--eval-seeds", "case seeds [1000] gave failures"),
    ("eval-seeds-twice", ["--eval-seeds", "5", "5"], "--eval-seeds", "distinct integers"),
    ("eval-seeds-not-int", ["--eval-seeds", "x"], "--eval-seeds", "invalid int value"),
]


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.parametrize(("bad", "argument", "message"), [case[1:] for case in BAD_ARGUMENTS],
                         ids=[case[0] for case in BAD_ARGUMENTS])
def test_a_bad_argument_is_one_line_naming_it_before_anything_is_written(tmp_path, tiny_zoo, sut_file, capsys, bad,
                                                                         argument, message):
    run = make_run(tmp_path, "run", ["valid_failure"] * 2)
    (tmp_path / "eval.yaml").write_text(yaml.safe_dump({"sut": TINY_SUT}))
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("someone else's\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "repair.json").write_text(json.dumps({"steps": 9}))
    good = [str(run), "--sut", str(sut_file), "--out", str(tmp_path / "out"), "--profile", "tiny", "--steps", "1",
            "--eval-config", str(tmp_path / "eval.yaml"), "--eval-seeds", "5", "--jobs", "1"]
    before = tree(tmp_path)
    capsys.readouterr()
    assert main(["repair", *good, *[a.format(tmp=tmp_path) for a in bad]]) == 2  # the last of an option wins
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and argument in lines[0] and message in lines[0], lines
    assert tree(tmp_path) == before and not (tmp_path / "out").exists()


def test_good_arguments_pass_the_checks_and_write_nothing(tmp_path, tiny_zoo, sut_file):
    from hynea_pl.repair.command import RepairSettings, check_arguments

    run = make_run(tmp_path, "run", ["valid_failure"] * 2)
    out = tmp_path / "out"
    settings, failures, original = check_arguments([run], out, str(sut_file), 2,
                                                   RepairSettings(eval_seeds=(5, 6), **SMALL))
    assert settings.sut == TINY_SUT and settings.failure_runs == (str(run.resolve()),) and len(failures) == 2
    assert not out.exists()
