"""The typed Campaign: built once from a config file, a parsed namespace or a LightningCLI, validated before any
folder exists; the outcome a case's module returns (``case_outcome``) and the record assembled from it."""

from __future__ import annotations

import dataclasses

import pytest
from test_cli import tiny_args

from hynea_pl.campaign import Campaign, RunOutput, run_campaign
from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.config import parse_config
from hynea_pl.campaign.outcome import fill_outcome, new_record
from hynea_pl.campaign.records import RunFolder


def test_run_output_resolves_the_method_name():
    assert RunOutput("runs", "mnist_{method}").resolved("sinvad") == RunOutput("runs", "mnist_sinvad", "sinvad")
    assert RunOutput("r", "x_{method}", "mine").resolved("sinvad") == RunOutput("r", "x_mine", "mine")


@pytest.fixture
def campaign(tiny_zoo, tmp_path) -> Campaign:
    return Campaign.from_config(parse_config(tiny_args(tmp_path, "c_{method}")[1:]))


def test_a_campaign_is_the_same_from_a_file_a_namespace_or_a_cli(campaign, tmp_path):
    assert (campaign.output.name, campaign.output.method, campaign.budget) == ("c_hynea", "hynea", 3)
    assert campaign.selection.classes == [1, 7] and campaign.selection.n_per_class == 1
    assert campaign.trainer.max_steps == 3 and campaign.validated
    assert campaign.reference is campaign.factory.nested("steering.model") is not None
    assert campaign.oracle is not None and campaign.realism is not None
    config = tmp_path / "config.yaml"
    config.write_text(campaign.config_text)
    again = Campaign.from_config(config, overrides=["--output.name", "other"])
    assert (again.output.name, again.budget, again.selection) == ("other", 3, campaign.selection)
    cli = parse_config(["--config", str(config)])
    for source in (cli, cli.config.clone()):
        built = Campaign.from_config(source)
        assert built.config_text == campaign.config_text and built.output == campaign.output
    with pytest.raises(ValueError, match="overrides go with a config file"):
        Campaign.from_config(cli, overrides=["--output.name", "x"])
    assert not list(tmp_path.glob("c_*")), "building a campaign creates no run folder"


def test_validate_refuses_before_any_folder_exists(campaign, tmp_path):
    judged_by_its_steerer = dataclasses.replace(
        campaign, components=dataclasses.replace(campaign.components, oracle=campaign.reference),
        output=RunOutput(str(tmp_path), "refused", "hynea"))
    assert not judged_by_its_steerer.validated, "a changed campaign is validated again"
    with pytest.raises(ValueError, match="oracle is the model.init_args.steering.model that steers"):
        run_campaign(judged_by_its_steerer)
    assert not (tmp_path / "refused").exists()


def test_the_outcome_of_a_case_that_failed_before_its_origin(campaign, tmp_path):
    model = campaign.build_module(TestCase("c1-0", 1, 100000, 0))
    outcome = model.case_outcome()
    assert not outcome.has_origin and outcome.origin_image is None and outcome.target is None
    assert outcome.sut_evals == 0 and outcome.stop_reason is None and outcome.diagnostics == {}
    assert outcome.result is model.result and outcome.save_adapter(tmp_path) is False
    record = new_record(TestCase("c1-0", 1, 100000, 0), campaign.output, campaign.sut.task)
    fill_outcome(record, outcome, campaign.sut, RunFolder(tmp_path, "run"))
    assert (record.method, record.run, record.case_id, record.sut_evals) == ("hynea", "c_hynea", "c1-0", 0)
    assert record.origin_pred is None and record.result_image is None


def test_a_failing_diagnostics_keeps_the_counts_and_becomes_the_cases_error(campaign, tmp_path, monkeypatch):
    model = campaign.build_module(TestCase("c1-0", 1, 100000, 0))
    model.sut_evals = 7

    def out_of_memory() -> dict:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(model, "record_diagnostics", out_of_memory)
    outcome = model.case_outcome()
    assert isinstance(outcome.diagnostics_error, RuntimeError) and outcome.sut_evals == 7
    record = new_record(TestCase("c1-0", 1, 100000, 0), campaign.output, campaign.sut.task)
    with pytest.raises(RuntimeError, match="out of memory"):
        fill_outcome(record, outcome, campaign.sut, RunFolder(tmp_path, "run"))
    assert record.sut_evals == 7 and record.diagnostics == {}, "as when the runner read the module itself"
