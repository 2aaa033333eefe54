"""Replayable failures: a flipped HyNeA case's adapter is saved beside its record, and ``replay`` regenerates the
result image from it and the seed."""

from __future__ import annotations

import json

import pytest
from method_runs import tiny_fit_args
from PIL import Image
from test_cli import tiny_args
from tiny_components import DIGIT_CENTROIDS, PAPER_HYNEA

from hynea_pl.campaign.campaign import Campaign
from hynea_pl.campaign.replay import replay
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


#: the paper's HyNeA stopped at its target within 3 steps of one SUT evaluation, with up to 3 runs a case, adapters
#: saved: measured, c0-0's first run finds its target, c1-0's first run misses (target 2) and its second finds (target
#: 0); at B = 2 c1-0's third run takes the free slot beside its second
RETRIED = (*PAPER_HYNEA, "--model.init_args.search.stop_on", "target", "--model.init_args.acceptance.margin", "0",
           "--model.init_args.search.lr_max", "0.05", "--model.init_args.search.lr_min", "0.005",
           "--model.init_args.retries.attempts", "3", "--model.init_args.save_adapters", "true")


@pytest.mark.parametrize("batch_size", [1, 2])
def test_replay_rebuilds_the_run_that_found_the_result(batch_size, tiny_zoo, tmp_path, capsys):
    """Every flipped case replays, whichever of its runs found the result (its adapter's ``run.json`` names the run:
    seeded and built again, its target checked), one case at a time and with later runs in spare slots; an adapter
    without ``run.json`` (saved before it existed) is the case's first run."""
    args = [*tiny_fit_args("hynea", tmp_path, budget=60, max_steps=3, classes=(0, 1), sut=DIGIT_CENTROIDS), *RETRIED,
            "--output.name", "r", "--cases.batch_size", str(batch_size), "--cases.spare_slots", "true"]
    assert main(args) == 0
    run = tmp_path / "r"
    campaign = Campaign.from_config(run / "config.yaml")
    records = {r.case_id: r for r in read_records(run / "records.jsonl")}
    saved = {}  # case id -> its adapter's run.json
    for record in records.values():
        assert (record.adapter is not None) == record.flipped, record.case_id
        if record.adapter is None:
            continue
        saved[record.case_id] = json.loads((run / record.adapter / "run.json").read_text())
        assert saved[record.case_id]["target"] == record.target
        assert saved[record.case_id]["arguments"] == {"attempt": saved[record.case_id]["run"]}
        result = replay(campaign, record, run)
        assert result.matches, (record.case_id, saved[record.case_id], result.max_abs_diff * 255)
    assert {case_id: found["run"] for case_id, found in saved.items()} == {"c0-0": 0, "c1-0": 1}
    later = records["c1-0"]
    if batch_size > 1:  # its third run ran beside the second, in the slot no planned case needed
        assert len(later.diagnostics["attempts"]) == 3
        return
    # an adapter saved before run.json existed holds the case's first run: it replays as before
    (run / records["c0-0"].adapter / "run.json").unlink()
    capsys.readouterr()
    assert main(["replay", str(run), "c0-0"]) == 0
    assert ": match" in capsys.readouterr().out
    # a run whose rebuilt target is not the one it saved: one line naming both
    (run / later.adapter / "run.json").write_text(json.dumps({**saved["c1-0"], "arguments": {"attempt": 0}}))
    assert main(["replay", str(run), "c1-0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run 1 saved target 0" in err[0] and "aims at 2" in err[0], err
