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

from hynea_pl.callbacks import CaseImageLogger, FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.campaign.cases import CaseSelection, TestCase, iter_cases
from hynea_pl.campaign.records import RunFolder
from hynea_pl.campaign.summary import summary_table
from hynea_pl.metrics import ms_ssim
from hynea_pl.objectives import frobenius_distance

console = Console()


@dataclass
class RunOutput:
    """Where a campaign writes: ``root/name/`` (an existing folder is resumed, finished cases are kept).

    Args:
        root: parent folder of runs.
        name: run name (folder, W&B run-name prefix); ``{method}`` is replaced by the method name.
        method: method name written into every record; default: the model's ``method_name`` (``hynea``,
            ``giftbench-low``, ``sinvad``, ...).
    """

    root: str = "runs"
    name: str = "mnist_{method}"
    method: str | None = None


def _case_config(config: Any, case: TestCase, run_name: str) -> Any:
    """A copy of the parsed config for one case: its class and seed, and a per-case logger name."""
    cfg = copy.deepcopy(config)
    cfg.model.init_args.origin_class = case.origin_class
    cfg.model.init_args.seed = case.seed
    logger = cfg.trainer.get("logger")
    if logger is not None and hasattr(logger, "get") and logger.get("init_args") is not None:
        if "name" in logger.init_args:
            logger.init_args.name = f"{run_name}/{case.case_id}"
    return cfg


def _close_logger(trainer: L.Trainer) -> None:
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()


def _pred(output: torch.Tensor | None) -> list | None:
    return None if output is None else output[0].detach().float().cpu().tolist()


def method_name(model: Any) -> str:
    """A test-case module's method name (its ``method_name``, else its class name)."""
    return str(getattr(model, "method_name", None) or type(model).__name__)


def run_case(cli: Any, case: TestCase, output: RunOutput, budget: int, folder: RunFolder) -> dict:
    """Fit one test case and append its record (``output`` has its method and name resolved)."""
    record: dict[str, Any] = {
        "method": output.method, "run": output.name, "case_id": case.case_id, "seed": case.seed,
        "origin_class": case.origin_class, "skipped_seeds": case.skipped_seeds, "target": None, "flipped": False,
        "sut_evals": 0, "steps": 0, "runtime_s": 0.0, "origin_pred": None, "result_pred": None, "ms_ssim": None,
        "distance": None, "origin_image": None, "result_image": None, "diff_image": None, "error": None,
    }
    if case.seed is None:
        record["error"] = f"no valid origin in {cli.config.cases.max_seed_tries} seeds"
        folder.append(record)
        return record

    start = time.perf_counter()
    L.seed_everything(case.seed, verbose=False)
    init = cli.parser.instantiate_classes(_case_config(cli.config, case, output.name))
    model = init.model
    trainer_kwargs = dict(vars(init.trainer))
    trainer_kwargs["callbacks"] = [*(trainer_kwargs.get("callbacks") or []), FlipEarlyStopping(),
                                   SUTEvaluationBudget(budget), CaseImageLogger()]
    trainer = L.Trainer(**trainer_kwargs)
    record["task"] = model.sut.task
    try:
        trainer.fit(model)
    except Exception as error:  # a failing case is recorded, the campaign goes on
        record["error"] = f"{type(error).__name__}: {error}"
    finally:
        _close_logger(trainer)
    record["runtime_s"] = time.perf_counter() - start

    result = model.result
    record.update(sut_evals=model.sut_evals, steps=trainer.global_step, flipped=result.flipped,
                  flip_step=result.step if result.flipped else None)
    if hasattr(model, "record_diagnostics"):  # method-specific numbers (e.g. GIFTbench's latent OOD measures)
        record["diagnostics"] = model.record_diagnostics()
    if getattr(model, "origin_output", None) is not None:  # setup ran: the origin exists
        record.update(target=int(model.target[0]), origin_pred=_pred(model.origin_output),
                      origin_label=int(model.sut.prediction(model.origin_output)[0]))
    if result.image is not None:
        origin, image = model.origin_image.cpu(), result.image.cpu()
        record.update(result_pred=_pred(result.output), result_label=int(model.sut.prediction(result.output)[0]),
                      ms_ssim=float(ms_ssim(image, origin)),
                      distance=float(frobenius_distance(origin, image)))
        record.update(folder.save_case_images(case.case_id, origin[0], image[0]))
        if hasattr(model.sut, "confidence_reduction"):  # detection (paper eq. 15)
            record["confidence_reduction"] = float(model.sut.confidence_reduction(
                model.origin_output, result.output.to(model.origin_output.device), model.target))
    folder.append(record)
    return record


def describe(index: int, total: int, record: dict) -> str:
    head = f"[{index}/{total}] {record['case_id']} seed {record['seed']}"
    if record["error"]:
        return f"{head}: [red]error[/] {record['error']}"
    verdict = (f"[green]flipped[/] to {record['result_label']} at step {record['flip_step']}" if record["flipped"]
               else f"[yellow]not flipped[/] (predicts {record.get('result_label')})")
    ssim = "-" if record["ms_ssim"] is None else f"{record['ms_ssim']:.3f}"
    return f"{head}: {verdict}, {record['sut_evals']} SUT evals, {record['runtime_s']:.1f} s, MS-SSIM {ssim}"


def run_campaign(cli: Any) -> dict:
    """Run every selected case not yet recorded in the run folder, then write and print the summary."""
    config = cli.config
    shared = cli.config_init
    output: RunOutput = RunOutput(**vars(config.output))
    output.method = output.method or method_name(shared.model)
    output.name = output.name.replace("{method}", output.method)
    selection = CaseSelection(**vars(config.cases))
    budget = int(config.budget.max_evals)
    folder = RunFolder(output.root, output.name)
    done = folder.done_case_ids()
    if done:
        console.print(f"resuming {folder.path}: {len(done)} case(s) already recorded are kept")
    cases = list(iter_cases(selection, shared.model.generator, shared.model.sut))
    todo = [case for case in cases if case.case_id not in done]
    for index, case in enumerate(todo, 1):
        record = run_case(cli, case, output, budget, folder)
        console.print(describe(index, len(todo), record), soft_wrap=True)
    summary = folder.finish()
    console.print(summary_table(f"{output.method} on {output.name}", summary))
    console.print(f"outputs: {folder.path}/ (records.jsonl, summary.json, grid.png, cases/)")
    return summary
