"""Cost columns say which cases they average, a case records why it stopped, SINVAD can restart until its budget."""

from __future__ import annotations

import json

import lightning as L
import pytest
from tiny_components import tiny_generator, tiny_sut

from hynea_pl.baselines.sinvad import SINVADCase
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.callbacks.stop import note_stop
from hynea_pl.campaign.summary import SUMMARY_KEYS, read_summary, summarize_records
from hynea_pl.evaluation import ended_before_budget_rate
from hynea_pl.schema import CaseRecord

CASE = {"origin_class": 3, "seed": 5}


def record(index: int, flipped: bool, sut_evals: int, stop_reason: str | None = None,
           error: str | None = None) -> CaseRecord:
    return CaseRecord(method="m", run="r", task="multiclass", case_id=f"c0-{index}", seed=index, origin_class=0,
                      flipped=flipped, sut_evals=sut_evals, runtime_s=1.0, error=error,
                      diagnostics={} if stop_reason is None else {"stop_reason": stop_reason})


def test_summary_keys_say_flipped_or_all_cases():
    records = [record(0, True, 10, "flipped"), record(1, True, 30, "flipped"), record(2, False, 410, "converged"),
               record(3, False, 2700, "budget"), record(4, True, 50, error="RuntimeError: boom")]
    summary = summarize_records(records)
    assert "median_sut_evals" not in summary and "mean_sut_evals" not in summary
    assert not {"median_sut_evals", "mean_sut_evals"} & set(SUMMARY_KEYS)
    # flipped: the two ok flips (a case with an error never counts as flipped); all: every case, errors included
    assert summary["median_sut_evals_flipped"] == 20 and summary["mean_sut_evals_flipped"] == 20
    assert summary["median_sut_evals_all"] == 50 and summary["mean_sut_evals_all"] == pytest.approx(3200 / 5)
    assert summary["ended_before_budget_rate"] == pytest.approx(1 / 5)


def test_the_summary_counts_and_prints_flips_on_results_no_method_accepted():
    from rich.console import Console

    from hynea_pl.campaign.summary import summary_table

    records = [record(0, True, 10, "flipped").model_copy(update={"verdict": "valid_failure", "accepted": True}),
               record(1, True, 30, "max_steps").model_copy(update={"verdict": "unaccepted", "accepted": False}),
               record(2, False, 40, "budget").model_copy(update={"verdict": "no_flip", "accepted": False})]
    summary = summarize_records(records)
    assert summary["unaccepted_rate"] == pytest.approx(1 / 3) and summary["valid_failure_rate"] == pytest.approx(1 / 3)
    assert summary["flip_rate"] == pytest.approx(2 / 3), "the SUT did flip on the best try: a flip, not a failure"
    console = Console(width=200, record=True)
    console.print(summary_table("m on r", summary))
    line = next(line for line in console.export_text().splitlines() if "unaccepted_rate" in line)
    assert "0.3333" in line


def test_ended_before_budget_rate_counts_own_rule_and_step_limit_stops():
    records = [record(0, False, 410, "converged"), record(1, False, 50, "max_steps"), record(2, True, 5, "flipped"),
               record(3, False, 2700, "budget")]
    assert ended_before_budget_rate(records) == pytest.approx(2 / 4)
    assert ended_before_budget_rate([record(0, False, 10), record(1, True, 5)]) is None  # no stop reason recorded
    assert ended_before_budget_rate([]) is None


def test_old_summary_keys_are_read_under_their_new_names(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"n_cases": 2, "median_sut_evals": 50, "mean_sut_evals": 88.6}))
    assert read_summary(path) == {"n_cases": 2, "median_sut_evals_flipped": 50, "mean_sut_evals_flipped": 88.6}


def test_the_most_decisive_stop_reason_wins():
    module = L.LightningModule()
    note_stop(module, "max_steps")
    note_stop(module, "budget")
    note_stop(module, "converged")
    assert module.stop_reason == "budget"
    note_stop(module, "flipped")
    assert module.stop_reason == "flipped"


def fit_sinvad(budget: int, max_steps: int = 10, **kwargs) -> SINVADCase:
    """A tiny SINVAD case whose scale decays after one generation (0.1 -> 0.07 < 0.08), fitted with the campaign's
    callbacks."""
    case = SINVADCase(tiny_generator(num_inference_steps=1), tiny_sut(), population_size=4, survivors=2,
                      min_scale=0.08, **CASE, **kwargs)
    L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
              enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
              callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)]).fit(case)
    return case


def test_sinvad_restarting_until_the_budget_spends_it_and_records_its_restarts():
    paper = fit_sinvad(12)
    assert not paper.result.found and paper.sut_evals == 4
    assert paper.stop_reason == "converged"  # the runner writes it into the record's diagnostics
    assert paper.record_diagnostics()["restarts"] == 0 and paper.method_name == "sinvad"

    restarted = fit_sinvad(12, restart_until_budget=True)
    assert not restarted.result.found and restarted.sut_evals == 12 > paper.sut_evals  # 3 starts of 4 new images
    diagnostics = restarted.record_diagnostics()
    assert diagnostics["restarts"] == 2 and restarted.stop_reason == "budget"
    assert [h["mutation_scale"] for h in restarted.result.history] == [0.1, 0.1, 0.1]  # the scale reset each time
    assert restarted.method_name == "sinvad-restart" and restarted.hparams.restart_until_budget


def test_a_case_stopped_by_the_trainer_step_limit_says_so():
    case = fit_sinvad(100, max_steps=2, restart_until_budget=True)
    assert case.sut_evals == 8 and case.stop_reason == "max_steps"
