"""Run a campaign: every selected test case with a fresh module, callbacks, logger and Trainer."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from lightning.pytorch.loggers import WandbLogger
from rich.console import Console
from rich.markup import escape

from hynea_pl.callbacks import CaseImageLogger, FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.campaign.cases import CaseSelection, TestCase, select_shared_cases
from hynea_pl.campaign.factory import build_trainer_args
from hynea_pl.campaign.records import RunFolder
from hynea_pl.campaign.summary import summary_table
from hynea_pl.campaign.tracking import track_campaign
from hynea_pl.errors import one_line
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics import ms_ssim
from hynea_pl.metrics.functional import task as FT
from hynea_pl.images import as_saved
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.evaluation.judge import judge_case
from hynea_pl.objectives import frobenius_distance
from hynea_pl.progress import StepProgress
from hynea_pl.report.grid import write_grids
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import SUT

console = Console()


class CampaignFailed(RuntimeError):
    """Every case of a campaign failed."""


@dataclass
class RunOutput:
    """Where a campaign writes: ``root/name/`` (an existing folder is resumed, finished cases are kept).

    Args:
        root: parent folder of runs.
        name: run name (folder, W&B run-name prefix); ``{method}`` is replaced by the method name.
        method: method name written into every record; default: the model's ``method_name`` (``hynea``,
            ``giftbench-low-1e-4``, ``sinvad``, ...).
    """

    root: str = "runs"
    name: str = "mnist_{method}"
    method: str | None = None


def case_trainer_config(trainer: Any, case: TestCase, run_name: str) -> Any:
    """A copy of the config's ``trainer`` section for one case: its logger named ``<run>/<case id>`` and, for W&B,
    grouped under the campaign's run name."""
    cfg = copy.deepcopy(trainer)
    logger = cfg.get("logger")
    if logger is not None and hasattr(logger, "get") and logger.get("init_args") is not None:
        if "name" in logger.init_args:
            logger.init_args.name = f"{run_name}/{case.case_id}"
        if logger.class_path.endswith("WandbLogger") and not logger.init_args.get("group"):
            logger.init_args.group = run_name
    return cfg


def build_case(cli: Any, case: TestCase, run_name: str) -> tuple[TestCaseModule, dict[str, Any]]:
    """The case's fresh module around the process's shared components (its origin handed over when the campaign
    sampled it) and its Trainer arguments (fresh callbacks and logger, on this process's device)."""
    model = cli.factory.build(case.origin_class, case.seed)
    if case.origin is not None:
        model.provide_origin(case.origin)
    trainer_kwargs = build_trainer_args(case_trainer_config(cli.config.trainer, case, run_name))
    return model, cli.shard.case_trainer_kwargs(trainer_kwargs)


def _close_logger(trainer: L.Trainer) -> None:
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()


def _pred(output: torch.Tensor) -> list:
    return output[0].detach().float().cpu().tolist()


def fill_outcome(record: CaseRecord, model: TestCaseModule, folder: RunFolder, oracle: SUT | None = None,
                 realism: TypicalityTest | None = None) -> None:
    """Write what a fitted (or failed) case produced into its record; the SUT's task decides flips on the result
    as saved, the ``oracle`` (when configured) and the ``realism`` test the validity verdict."""
    record.sut_evals = int(model.sut_evals)
    record.diagnostics = model.record_diagnostics()
    if model.stop_reason is not None:  # noted by the callbacks (hynea_pl.callbacks.stop), the same for every method
        record.diagnostics["stop_reason"] = model.stop_reason
    if not model.has_origin:  # the case failed before its origin existed
        return
    sut, origin_output, target = model.sut, model.origin_output, model.target
    record.target = int(target[0])
    record.origin_pred = _pred(origin_output)
    record.origin_label = int(sut.prediction(origin_output)[0])
    result = model.result
    if result.image is None:
        return
    device = origin_output.device
    record.flipped_before_saving = bool(sut.is_flipped(result.output.to(device), origin_output, target)[0])
    # the result is judged as saved (8-bit PNG): a re-read of the found image, not a search step (not counted)
    saved = as_saved(result.image.to(device))
    with torch.no_grad():
        output = sut(saved)
    record.result_pred = _pred(output)
    record.result_label = int(sut.prediction(output)[0])
    record.flipped = bool(sut.is_flipped(output, origin_output, target)[0])
    record.target_reached = bool(sut.reaches_target(output, origin_output, target)[0])
    record.result_step = result.step
    origin, image = model.origin_image.cpu(), saved.cpu()
    # the task's own fields (detection: confidence reduction, and the boxes the galleries draw, paper Fig. 6)
    for key, value in sut.decision_fields(origin_output, output, target, model.origin_image, saved, FT).items():
        setattr(record, key, value)
    record.ms_ssim = float(ms_ssim(image, origin))
    record.distance = float(frobenius_distance(origin, image))
    for key, path in folder.save_case_images(record.case_id, origin[0], image[0]).items():
        setattr(record, key, path)
    if oracle is not None:
        for key, value in judge_case(oracle, record, origin, image, realism).items():
            setattr(record, key, value)
    if record.flipped:
        directory, relative = folder.adapter_dir(record.case_id)
        if model.save_adapter(directory):
            record.adapter = relative


def run_case(cli: Any, case: TestCase, output: RunOutput, budget: int, folder: RunFolder, task: str) -> CaseRecord:
    """Build and fit one test case and append its record; any failure (build, NaN, OOM, ...) is recorded."""
    record = CaseRecord(method=output.method, run=output.name, task=task, case_id=case.case_id, seed=case.seed,
                        origin_class=case.origin_class, skipped_seeds=case.skipped_seeds)
    if case.seed is None:
        record.error = f"no valid origin in {cli.config.cases.max_seed_tries} seeds"
        folder.append(record)
        return record

    start = time.perf_counter()
    model: TestCaseModule | None = None
    trainer: L.Trainer | None = None
    try:
        L.seed_everything(case.seed, verbose=False)
        model, trainer_kwargs = build_case(cli, case, output.name)
        trainer_kwargs["callbacks"] = [*(trainer_kwargs.get("callbacks") or []), FlipEarlyStopping(),
                                       SUTEvaluationBudget(budget), CaseImageLogger()]
        trainer = L.Trainer(**trainer_kwargs)
        trainer.fit(model)
    except Exception as error:  # a failing case is recorded, the campaign goes on
        record.error = f"{type(error).__name__}: {one_line(error)}"
    finally:
        if trainer is not None:
            _close_logger(trainer)
    record.runtime_s = time.perf_counter() - start
    record.steps = trainer.global_step if trainer is not None else 0
    if model is not None:
        try:
            fill_outcome(record, model, folder, cli.components.oracle, cli.components.realism)
        except Exception as error:
            record.error = record.error or f"{type(error).__name__}: {one_line(error)}"
    folder.append(record)
    return record


def describe(index: int, total: int, record: CaseRecord) -> str:
    head = f"[{index}/{total}] {record.case_id} seed {record.seed}"
    if record.error:
        return f"{head}: [red]error[/] {record.error}"
    if record.flipped:
        outcome = f"flipped to {record.result_label} at step {record.result_step}"
        if not record.target_reached:
            outcome += f" (target {record.target} not reached)"
    else:
        outcome = f"[yellow]not flipped[/] (predicts {record.result_label})"
    judged = {"valid_failure": "[green]valid failure[/]", "degraded": "[yellow]degraded[/]",
              "semantic_change": "[red]semantic change[/]", "ambiguous": "[yellow]ambiguous[/]"}.get(record.verdict or "")
    if judged:
        readings = (" ".join(map(str, record.judge_labels.values())) if record.judge_labels
                    else str(record.oracle_result_label))
        outcome += f" -> {judged} (judges read {readings})"
    ssim = "-" if record.ms_ssim is None else f"{record.ms_ssim:.3f}"
    return f"{head}: {outcome}, {record.sut_evals} SUT evals, {record.runtime_s:.1f} s, MS-SSIM {ssim}"


def run_campaign(cli: Any) -> dict:
    """Run this process's share of the selected cases not yet recorded in the run folder; rank 0 then merges
    every shard and writes and prints the summary (other ranks return an empty dict).

    Raises :class:`CampaignFailed` (after writing the summary) when every case run here failed.
    """
    config, shard = cli.config, cli.shard
    output: RunOutput = RunOutput(**vars(config.output))
    output.method = output.method or cli.model.method_name
    output.name = output.name.replace("{method}", output.method)
    selection = CaseSelection(**vars(config.cases))
    budget = int(config.budget.max_evals)
    folder = RunFolder(output.root, output.name, rank=shard.rank if shard.world_size > 1 else None)
    cases = select_shared_cases(selection, cli.components, shard, console)
    order = [case.case_id for case in cases]
    if shard.is_main:
        folder.write_config(cli.parser.dump(config, skip_none=False))
        done = {r.case_id for r in folder.consolidate(order)}
        if done:
            console.print(f"resuming {folder.path}: {len(done)} case(s) already recorded are kept", soft_wrap=True)
    shard.barrier()
    done = folder.done_case_ids()
    todo = [case for case in cases if case.case_id not in done]
    mine = shard.take(todo)
    task = cli.components.sut.task
    label = f"{shard.prefix}cases" if shard.world_size > 1 else "cases"
    flipped = valid = 0
    with StepProgress(label, len(mine), unit="case", interval_s=0.0, console=console) as progress:
        for index, case in enumerate(mine, 1):
            record = run_case(cli, case, output, budget, folder, task)
            flipped += bool(record.flipped)
            valid += record.verdict == "valid_failure"
            console.print(escape(shard.prefix) + describe(index, len(mine), record), soft_wrap=True)
            progress.set_status(f"{flipped} flipped" + (f", {valid} valid failures" if cli.components.oracle else ""))
            progress.update()
    shard.barrier()
    if not shard.is_main:
        return {}
    records = folder.consolidate(order)
    write_grids(folder.path, records)  # grid.png, grid_valid_failures.png: drawn by the report layer
    summary = folder.finish()
    track_campaign(cli.config.trainer, output.name, records, folder.path, summary)
    console.print(summary_table(f"{output.method} on {output.name}", summary))
    console.print(f"outputs: {folder.path}/ (records.jsonl, summary.json, grid.png, cases/)")
    ran = [r for r in records if r.case_id in {case.case_id for case in todo}]
    if ran and all(r.error for r in ran):
        raise CampaignFailed(f"every case failed ({len(ran)}/{len(ran)}); first error: {ran[0].error}")
    return summary
