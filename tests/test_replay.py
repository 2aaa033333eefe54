"""Replayable failures: a flipped HyNeA case's adapter is saved beside its record, and ``replay`` regenerates the
result image from it and the seed."""

from __future__ import annotations

import pytest
from PIL import Image
from test_cli import tiny_args
from tiny_components import DIGIT_CENTROIDS

from hynea_pl.cli import main
from hynea_pl.schema import read_records
from hynea_pl.zoo.cache import MOVED_CLASSES


def replay_args(root, name, *extra):
    args = tiny_args(root, name, "--model.init_args.save_adapters", "true", "--model.init_args.search.lr_min", "1e-2",
                     "--model.init_args.search.lr_max", "1e-1", "--trainer.max_steps", "12", "--budget.max_evals", "12",
                     *DIGIT_CENTROIDS, *extra)  # a SUT every pixel moves: the cases flip; 12 steps of one evaluation
    return args


@pytest.mark.slow
def test_replay_regenerates_a_flipped_result_from_its_saved_adapter(tiny_zoo, tmp_path, capsys):
    assert main(replay_args(tmp_path, "r")) == 0
    run = tmp_path / "r"
    records = read_records(run / "records.jsonl")
    flipped = [r for r in records if r.flipped]
    assert flipped, "the run flips a case of the DigitCentroids SUT"
    for record in records:  # only flipped cases carry an adapter
        assert (record.adapter is not None) == record.flipped
    record = flipped[0]
    folder = run / record.adapter
    assert (folder / "hypernet" / "config.json").is_file() and (folder / "projector" / "config.json").is_file()
    capsys.readouterr()
    assert main(["replay", str(run), record.case_id]) == 0
    out = capsys.readouterr().out
    label = record.result_label
    assert f"SUT label {label}, on the stored PNG {label} (recorded {label}): match" in out
    # a run written before the zoo's classes moved names their old class paths in its config.yaml
    config = run / "config.yaml"
    text = config.read_text()
    for old, new in MOVED_CLASSES.items():
        text = text.replace(new, old)
    assert "hynea_pl.zoo.oracle_sut.ZooOracle" in text and "hynea_pl.zoo.realism.ZooTypicality" in text
    config.write_text(text)
    assert main(["replay", str(run), record.case_id]) == 0
    assert f"SUT label {label}, on the stored PNG {label} (recorded {label}): match" in capsys.readouterr().out
    # a stored PNG of another size: one line naming it and both sizes
    Image.new("L", (5, 7)).save(run / record.result_image)
    assert main(["replay", str(run), record.case_id]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(run / record.result_image) in err[0] and "7x5, 1 channel" in err[0], err


def test_replay_names_a_case_without_adapter(tiny_zoo, tmp_path, capsys):
    assert main(tiny_args(tmp_path, "plain")) == 0
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "plain"), "c1-0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no saved adapter" in err and "save_adapters" in err
    assert main(["replay", str(tmp_path / "plain"), "c9-9"]) == 2
    assert "no case 'c9-9'" in capsys.readouterr().err
