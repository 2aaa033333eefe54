"""The validity oracle in a campaign: every case gets a verdict from a judge built once, the summary reports
valid failures, and a judge that also steers the search is refused."""

from __future__ import annotations

import json

import pytest
from test_cli import tiny_args

from hynea_pl.cli import main
from hynea_pl.metrics.functional.validity import VERDICTS
from hynea_pl.schema import read_records

#: The tiny zoo's embedder network (a DigitCNN trained apart from the SUT) as a stand-in judge.
JUDGE = ["--oracle", "hynea_pl.suts.ClassifierSUT", "--oracle.init_args.model", "hynea_pl.zoo.classifier.DigitCNN",
         "--oracle.init_args.model.init_args.channels", "[8, 8, 16]", "--oracle.init_args.model.init_args.hidden", "16",
         "--oracle.init_args.weights", "zoo://tiny/embedder",
         "--oracle.init_args.preprocess", "{size: 32, channels: 1, mean: [0.5], std: [0.5]}"]


@pytest.mark.slow
def test_every_case_gets_the_oracles_verdict_and_the_summary_counts_valid_failures(tiny_zoo, tmp_path):
    assert main(tiny_args(tmp_path, "judged", *JUDGE, "--model.init_args.lr_min", "1e-2",
                          "--model.init_args.lr_max", "1e-1", "--trainer.max_steps", "6",
                          "--budget.max_evals", "6")) == 0
    records = read_records(tmp_path / "judged" / "records.jsonl")
    for record in records:
        assert record.verdict in VERDICTS and record.oracle_result_label is not None
        assert (record.verdict == "no_flip") == (not record.flipped)
        assert 0 < record.oracle_result_confidence <= 1
    summary = json.loads((tmp_path / "judged" / "summary.json").read_text())
    valid = sum(r.verdict == "valid_failure" for r in records)
    assert summary["valid_failure_rate"] == pytest.approx(valid / len(records))
    assert summary["valid_failure_rate"] + summary["semantic_change_rate"] + summary["ambiguous_rate"] == \
        pytest.approx(summary["flip_rate"])
    assert main(["compare", str(tmp_path / "judged"), "--out", str(tmp_path), "--embedder", "none"]) == 0
    assert "valid_failure_rate" in (tmp_path / "compare.md").read_text()


def test_a_judge_that_also_steers_the_search_is_refused(tmp_path, capsys):
    steer = [arg.replace("--oracle", "--model.init_args.reference") for arg in JUDGE]
    assert main(tiny_args(tmp_path, "x", *JUDGE, *steer)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "must never judge it" in err
    assert not (tmp_path / "x").exists()


def test_without_an_oracle_the_validity_columns_are_empty(tmp_path):
    from hynea_pl.metrics.rescore import validity_columns
    from hynea_pl.schema import CaseRecord

    cases = [CaseRecord(method="m", run="r", task="multiclass", case_id="c1-0", seed=1, origin_class=1, flipped=True)]
    assert all(value is None for value in validity_columns(cases).values())
