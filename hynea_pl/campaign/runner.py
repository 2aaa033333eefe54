"""The case loop of a campaign: every selected case with a fresh module, callbacks, logger and Trainer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import lightning as L

from hynea_pl.campaign import console
from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.cases import select_shared_cases
from hynea_pl.campaign.outcome import case_error, finish_record, new_record, no_origin_error
from hynea_pl.campaign.records import RunFolder, config_differences
from hynea_pl.campaign.tracking import close_case_loggers, track_campaign
from hynea_pl.errors import CampaignFailed, ConfigMismatch
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.progress import StepProgress
from hynea_pl.schema import CaseRecord
from hynea_pl.verdicts import VALID_FAILURE

if TYPE_CHECKING:
    from hynea_pl.campaign.campaign import Campaign


#: a case's n-th run is seeded with ``case.seed + n * ATTEMPT_SEED_STRIDE``
ATTEMPT_SEED_STRIDE = 7919


def fit_attempt(campaign: Campaign, case: TestCase, model: TestCaseModule) -> L.Trainer:
    """Fit one run of a case's module with a fresh Trainer and the campaign's case callbacks."""
    trainer_kwargs = campaign.trainer_kwargs(case)
    trainer_kwargs["callbacks"] = [*(trainer_kwargs.get("callbacks") or []), *campaign.case_callbacks()]
    trainer = L.Trainer(**trainer_kwargs)
    try:
        trainer.fit(model)
    except SystemExit as stop:  # Lightning turns Ctrl-C into sys.exit(1): keep it an interrupt (cli says so)
        if type(stop) is SystemExit and trainer.interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        close_case_loggers(trainer)
    return trainer


def attempt_rank(model: TestCaseModule, campaign: Campaign) -> tuple[bool, bool]:
    """How good a run's result is: found (the method's own stop rule held), then flipped by the SUT."""
    result = model.result
    if result.output is None or not model.has_origin:
        return False, False
    flipped = bool(campaign.sut.is_flipped(result.output, model.origin_output, model.target).all())
    return result.found, flipped


def run_case(campaign: Campaign, case: TestCase, folder: RunFolder) -> CaseRecord:
    """Build and fit one test case and append its record; any failure (build, NaN, OOM, ...) is recorded.

    A method may run a case more than once within its budget (:meth:`TestCaseModule.next_attempt`): each run is a
    fresh module and Trainer that starts from the evaluations spent so far, so the budget holds across runs. The
    record keeps the best run's result (found, else flipped, else the first) and every run's evaluations
    (``diagnostics.attempts``)."""
    record = new_record(case, campaign.output, campaign.sut.task, folder, campaign.generator)
    if case.seed is None:
        record.error = no_origin_error(campaign)
        folder.append(record)
        return record

    start = time.perf_counter()
    model: TestCaseModule | None = None
    kept: TestCaseModule | None = None
    attempts: list[dict] = []
    spent = steps = 0
    try:
        overrides: dict | None = {}
        while overrides is not None:
            # each run draws from its own seed (the first from the case's): no state carries from case to case
            L.seed_everything(case.seed + ATTEMPT_SEED_STRIDE * len(attempts), verbose=False)
            model = campaign.build_module(case, **overrides)
            model.sut_evals = spent  # the budget callback counts the case's evaluations over all its runs
            trainer = fit_attempt(campaign, case, model)
            steps += trainer.global_step
            attempts.append({**model.attempt_summary(), "sut_evals": int(model.sut_evals) - spent,
                             "steps": trainer.global_step, "stop_reason": model.stop_reason})
            spent = int(model.sut_evals)
            if kept is None or attempt_rank(model, campaign) > attempt_rank(kept, campaign):
                kept = model
            overrides = model.next_attempt()
            if overrides is not None and spent + model.evals_per_step > campaign.budget:
                overrides = None
        model = kept
    except Exception as error:  # a failing case is recorded, the campaign goes on
        record.error = case_error(error, record, folder)
    record.runtime_s = time.perf_counter() - start
    if model is not None:
        model.sut_evals = max(spent, int(model.sut_evals))
    finish_record(campaign, record, model, steps, folder, attempts if len(attempts) > 1 else None)
    return record


def check_resumable(campaign: Campaign) -> None:
    """Refuse (:class:`hynea_pl.errors.ConfigMismatch`, before anything is written) a rerun into a run folder whose
    ``config.yaml`` differs from this campaign's config in anything but the output, the logger and the case
    selection (:func:`hynea_pl.campaign.records.config_differences`), unless ``output.resume`` is ``force``."""
    output = campaign.output
    if campaign.config_text is None or output.resume == "force":
        return
    path = Path(output.root) / output.name
    keys = config_differences(path, campaign.config_text)
    if keys:
        shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
        raise ConfigMismatch(f"{path} was run with another config: {shown} differ from its config.yaml; rerun with "
                             "that config, another --output.name, or --output.resume force to continue it anyway")


#: Called by rank 0 with the run folder and every record once the cases are merged, before the summary (``fit``
#: passes the report layer's :func:`hynea_pl.report.grid.write_grids`: the campaign never imports the report).
RecordsHook = Callable[[Path, list[CaseRecord]], object]


def run_campaign(campaign: Campaign, on_records: RecordsHook | None = None) -> dict:
    """Run this process's share of the selected cases not yet recorded in the run folder; rank 0 then merges
    every shard, calls ``on_records`` (e.g. to draw the grids) and writes and prints the summary (other ranks return
    an empty dict). A campaign not yet validated is validated first (:meth:`Campaign.validate`), before its run
    folder exists. A rerun into an existing folder must have its config (:func:`check_resumable`); its failed
    cases are run again.

    Raises :class:`CampaignFailed` (after writing the summary) when every case run here failed.
    """
    if not campaign.validated:
        campaign.validate()
    shard, output = campaign.shard, campaign.output
    check_resumable(campaign)
    images = None
    if campaign.selection.images is not None:  # read (a bad folder is one line) before the run folder exists
        from hynea_pl.campaign.image_cases import read_case_images

        images = read_case_images(campaign.selection, campaign.generator)
        console.images_read(campaign.selection.images, images)
    folder = RunFolder(output.root, output.name, rank=shard.rank if shard.world_size > 1 else None)
    if images is not None and shard.is_main:
        folder.write_test_images(campaign.selection.images, len(images.labels), images.skipped, images.converted)
    cases = select_shared_cases(campaign.selection, campaign.components, shard, console.console, images)
    order = [case.case_id for case in cases]
    if shard.is_main:
        if campaign.config_text is not None:
            folder.write_config(campaign.config_text, replace=output.resume == "force")
        recorded = folder.consolidate(order)
        if recorded:
            failed = sum(bool(r.error) for r in recorded)
            console.resuming(folder.path, len(recorded) - failed, failed)
    shard.barrier()
    done = folder.done_case_ids()
    todo = [case for case in cases if case.case_id not in done]
    mine = shard.take(todo)
    label = f"{shard.prefix}cases" if shard.world_size > 1 else "cases"
    flipped = valid = 0
    with StepProgress(label, len(mine), unit="case", interval_s=0.0, console=console.console) as progress:
        index = 0

        def done(record: CaseRecord) -> None:
            nonlocal index, flipped, valid
            index += 1
            flipped += bool(record.flipped)
            valid += record.verdict == VALID_FAILURE
            console.case_done(shard.prefix, index, len(mine), record)
            progress.set_status(console.status(flipped, valid, bool(campaign.oracle)))
            progress.update()

        if campaign.selection.batch_size > 1:
            from hynea_pl.campaign.batched_runner import run_batched_cases

            run_batched_cases(campaign, mine, folder, done)
        else:
            for case in mine:
                done(run_case(campaign, case, folder))
    shard.barrier()
    if not shard.is_main:
        return {}
    records = folder.consolidate(order)
    if on_records is not None:
        on_records(folder.path, records)
    summary = folder.finish(campaign.oracle.verdict_ceiling(campaign.realism) if campaign.oracle else None)
    track_campaign(campaign.trainer, output.name, records, folder.path, summary)
    console.finished(output.method, output.name, summary, folder.path)
    ran = [r for r in records if r.case_id in {case.case_id for case in todo}]
    if ran and all(r.error for r in ran):
        raise CampaignFailed(f"every case failed ({len(ran)}/{len(ran)}); first error: {ran[0].error}")
    return summary


__all__ = ["check_resumable", "run_campaign", "run_case"]
