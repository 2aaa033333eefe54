"""The validity oracle in a campaign: every case gets a verdict from a judge built once, the summary reports
valid failures, and a judge that also steers the search is refused."""

from __future__ import annotations

import json

import pytest
from test_cli import tiny_args

from hynea_pl.cli import main
from hynea_pl.schema import read_records
from hynea_pl.verdicts import VERDICTS

#: The tiny zoo's judges (tiny_args points the config's oracle at them) and its steering member.
JUDGE: list[str] = []
STEER = ["--model.init_args.steering.model", "hynea_pl.zoo.labelled.oracle_sut.ZooOracle",
         "--model.init_args.steering.model.init_args.profile", "tiny"]


@pytest.mark.slow
def test_every_case_gets_the_oracles_verdict_and_the_summary_counts_valid_failures(tiny_zoo, tmp_path):
    assert main(tiny_args(tmp_path, "judged", *JUDGE, "--model.init_args.search.lr_min", "1e-2",
                          "--model.init_args.search.lr_max", "1e-1", "--trainer.max_steps", "6",
                          "--budget.max_evals", "42")) == 0
    records = read_records(tmp_path / "judged" / "records.jsonl")
    for record in records:
        assert record.verdict in VERDICTS and record.oracle_result_label is not None
        assert (record.verdict == "no_flip") == (not record.flipped)
        assert 0 < record.oracle_result_confidence <= 1
    summary = json.loads((tmp_path / "judged" / "summary.json").read_text())
    valid = sum(r.verdict == "valid_failure" for r in records)
    assert summary["valid_failure_rate"] == pytest.approx(valid / len(records))
    assert summary["valid_failure_rate"] + summary["degraded_rate"] + summary["semantic_change_rate"] + \
        summary["ambiguous_rate"] + summary["unaccepted_rate"] == pytest.approx(summary["flip_rate"])
    assert main(["compare", str(tmp_path / "judged"), "--out", str(tmp_path), "--embedder", "none"]) == 0
    assert "valid_failure_rate" in (tmp_path / "compare.md").read_text()
    # beside it, the ceiling of its verdict: the zoo judges' and realism test's valid rate on the MNIST test digits
    gates = {gate["name"]: gate["value"] for gate in tiny_zoo.quality["gates"]}
    assert summary["verdict_ceiling"] == gates["verdict_ceiling"] is not None
    assert list(summary).index("verdict_ceiling") == list(summary).index("valid_failure_rate") + 1


def test_the_verdict_ceiling_is_known_only_for_the_verdict_that_measured_it(tiny_zoo):
    from hynea_pl.zoo.labelled.oracle_sut import ZooOracle
    from hynea_pl.zoo.labelled.realism import ZooTypicality

    judges, realism = ZooOracle("tiny", "judges"), ZooTypicality("tiny")
    measured = {gate["name"]: gate["value"] for gate in tiny_zoo.quality["gates"]}["verdict_ceiling"]
    assert judges.verdict_ceiling(realism) == measured
    # judges with a "not a digit" answer are their own realism part: any realism test is only recorded
    assert judges.reads_no_class
    assert judges.verdict_ceiling(None) == judges.verdict_ceiling(ZooTypicality("tiny", quantile=0.9)) == measured
    assert ZooOracle("tiny", "judges", members=["oracle-1"]).verdict_ceiling(realism) is None
    assert ZooOracle("tiny", "steering").verdict_ceiling(realism) is None


def test_a_judge_that_also_steers_the_search_is_refused(tmp_path, capsys):
    judges_steer = [*STEER, "--model.init_args.steering.model.init_args.role", "judges"]
    assert main(tiny_args(tmp_path, "x", *judges_steer)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "must never judge it" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_the_steering_member_may_steer_while_the_judges_judge(tiny_zoo, tmp_path):
    args = tiny_args(tmp_path, "steered", *STEER, "--model.init_args.steering.model.init_args.role", "steering",
                     "--model.init_args.steering.weight", "1.0", "--cases.classes", "[1]")
    assert main(args) == 0
    (record,) = read_records(tmp_path / "steered" / "records.jsonl")
    assert record.error is None and record.verdict is not None
    assert {"reference_origin_label", "reference_result_label"} <= record.diagnostics.keys()


def test_without_an_oracle_the_validity_columns_are_empty(tmp_path):
    from hynea_pl.evaluation import validity_columns
    from hynea_pl.schema import CaseRecord

    cases = [CaseRecord(method="m", run="r", task="multiclass", case_id="c1-0", seed=1, origin_class=1, flipped=True)]
    assert all(value is None for value in validity_columns(cases).values())
