"""The case loop of a campaign: every selected case with a fresh module, callbacks, logger and Trainer, or (at
``cases.batch_size > 1``) B cases at a time in the method's batched module and one Trainer. Both loops start and end
a case the same way (:class:`CaseRun`) and fit under the same Ctrl-C guard (:func:`guarded_fit`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L

from hynea_pl.campaign import console
from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.cases import select_shared_cases
from hynea_pl.campaign.outcome import case_error, finish_record, new_record, no_origin_error
from hynea_pl.campaign.records import RunFolder, config_differences
from hynea_pl.campaign.tracking import close_case_loggers, track_campaign
from hynea_pl.callbacks.stop import note_stop
from hynea_pl.errors import CampaignFailed, ConfigMismatch
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.progress import StepProgress
from hynea_pl.schema import CaseRecord
from hynea_pl.verdicts import VALID_FAILURE

if TYPE_CHECKING:
    from hynea_pl.campaign.campaign import Campaign


#: a case's n-th run is seeded with ``case.seed + n * ATTEMPT_SEED_STRIDE``
ATTEMPT_SEED_STRIDE = 7919
#: Told each record once it is written.
Done = Callable[[CaseRecord], None]


class CaseRun:
    """One case from its record's creation to its write, in the single and the batched case loop alike.

    :meth:`start` creates the record (a case without an origin is written at once: ``None``). A method may run a
    case more than once within its budget (:meth:`TestCaseModule.next_attempt`): :meth:`build` seeds and builds each
    run, and :meth:`ended` notes a run that ended, keeps the best result so far (:func:`attempt_rank`) and says whether
    another run follows. In a batch, a case whose run ended without its result may also run its later runs side by
    side in slots no other case needs (:meth:`spare`): the first run that finds its result ends the case, the others
    stop then (``case_done``), and the case's SUT evaluations are those of all its runs (:attr:`sut_evals`, which its
    budget bounds). :meth:`finish` records the error that ended the case (if any), its runtime and the kept run's result
    (:func:`~hynea_pl.campaign.outcome.finish_record`, with every run's evaluations in ``diagnostics.attempts``),
    writes the record and hands it to ``done``; a case with runs still in slots is finished when its last one ends
    (:attr:`settled`)."""

    def __init__(self, campaign: Campaign, case: TestCase, folder: RunFolder, done: Done) -> None:
        self.campaign, self.case, self.folder, self.done = campaign, case, folder, done
        self.record = new_record(case, campaign.output, campaign.sut.task, folder, campaign.generator)
        self.clock_start = time.perf_counter()
        self.attempts: list[dict] = []  # each ended run's summary, in the order they ended
        self.ended_numbers: list[int] = []  # and its number
        self.kept: TestCaseModule | None = None
        self.spent = self.steps = 0
        self.live: dict[int, TestCaseModule] = {}  # id -> the runs built and not ended
        self.built = 0  # runs built so far: the next run's number
        self.base: dict[int, int] = {}  # id -> the case's evaluations its counter started from
        self.latest: TestCaseModule | None = None
        self.missed = False  # a run ended without its result: later runs may take free slots
        self.over = False  # a run found its result or failed: the case ends when its last run does
        self.failure: tuple[TestCaseModule | None, BaseException, int] | None = None

    @classmethod
    def start(cls, campaign: Campaign, case: TestCase, folder: RunFolder, done: Done) -> CaseRun | None:
        run = cls(campaign, case, folder, done)
        if case.seed is not None:
            return run
        run.record.error = no_origin_error(campaign)
        folder.append(run.record)
        done(run.record)
        return None

    @property
    def sut_evals(self) -> int:
        """The case's SUT evaluations so far: its ended runs' and those of its runs in slots."""
        return self.spent + sum(int(m.sut_evals) - self.base[key] for key, m in self.live.items())

    @property
    def settled(self) -> bool:
        """Whether no run of the case is left in a slot."""
        return not self.live

    def build(self, **overrides: Any) -> TestCaseModule:
        """The case's next run: run ``n`` draws from its own seed (``case.seed + n * ATTEMPT_SEED_STRIDE``: no state
        carries from case to case; the module keeps ``n`` as its ``run_number``) and its evaluation counter starts
        from the case's (so the budget holds across runs)."""
        number, self.built = self.built, self.built + 1
        L.seed_everything(self.case.seed + ATTEMPT_SEED_STRIDE * number, verbose=False)
        model = self.campaign.build_module(self.case, **overrides)
        model.run_number = number  # a saved adapter names its run (replay seeds and builds it again)
        key = id(model)
        self.base[key] = model.sut_evals = int(self.sut_evals)
        self.live[key], self.latest = model, model
        return model

    def number(self, model: TestCaseModule) -> int:
        """Which run of the case ``model`` is (0: the first): its ``run_number``, set by :meth:`build`."""
        return model.run_number

    def forget(self, model: TestCaseModule) -> None:
        """Drop a run that failed before it ran (its build or setup): it spent nothing."""
        self.live.pop(id(model), None)

    def can_pay(self, model: TestCaseModule) -> bool:
        """Whether the case's budget pays for one more step of a run like ``model``."""
        return self.sut_evals + int(model.evals_per_step) <= self.campaign.budget

    def ended(self, model: TestCaseModule, steps: int) -> dict | None:
        """Note a run that ended without an error after ``steps`` steps; the next run's arguments, or ``None`` when
        none follows (the case found its result or failed, no runs are left, or no budget for one more step)."""
        key = id(model)
        own = int(model.sut_evals) - self.base[key]
        del self.live[key]
        self.spent += own
        self.steps += steps
        self.attempts.append({**model.attempt_summary(), "sut_evals": own, "steps": steps,
                              "stop_reason": model.stop_reason})
        self.ended_numbers.append(self.number(model))
        rank = (*attempt_rank(model, self.campaign), -self.number(model))
        if self.kept is None or rank > (*attempt_rank(self.kept, self.campaign), -self.number(self.kept)):
            self.kept = model
        if model.result.found:
            self.close()
        if self.over:
            return None
        self.missed = True
        overrides = model.next_attempt() if model is self.latest else self.latest.later_attempt()
        return overrides if overrides is not None and self.can_pay(model) else None

    def failed(self, model: TestCaseModule | None, error: BaseException, steps: int) -> None:
        """Note a run that ``error`` ended after ``steps`` steps: the case ends with it."""
        if model is not None:
            self.live.pop(id(model), None)
        if self.failure is None:
            self.failure = (model, error, steps)
        self.close()

    def close(self) -> None:
        """The case is over: its runs still in slots stop after their current step (``case_done``)."""
        self.over = True
        for other in self.live.values():
            note_stop(other, "case_done")

    def spare(self) -> dict | None:
        """The arguments of a later run that may take a free slot beside the case's runs, or ``None``: only a case
        still open, one of whose runs ended without its result, with a later run left and budget for a step."""
        if self.over or not self.missed or self.latest is None or not self.live:
            return None
        overrides = self.latest.later_attempt()
        return overrides if overrides is not None and self.can_pay(self.latest) else None

    def finish(self, model: TestCaseModule | None = None, error: BaseException | None = None, steps: int = 0) -> None:
        """Write the record: the kept run's result, or, for an ``error`` (given, or noted by :meth:`failed`), that of
        ``model``, the run it ended after ``steps`` steps."""
        if error is None and self.failure is not None:
            model, error, steps = self.failure
        if error is None:
            model = self.kept
        else:
            self.record.error = case_error(error, self.record, self.folder)
        if model is not None:
            model.sut_evals = max(self.spent, int(model.sut_evals))
        self.record.runtime_s = time.perf_counter() - self.clock_start
        order = sorted(range(len(self.attempts)), key=self.ended_numbers.__getitem__)
        attempts = [self.attempts[i] for i in order] if len(self.attempts) > 1 else None
        finish_record(self.campaign, self.record, model, self.steps + steps, self.folder, attempts)
        self.done(self.record)


def guarded_fit(trainer: L.Trainer, module: L.LightningModule) -> None:
    """``trainer.fit(module)``, its case loggers closed after. Lightning turns Ctrl-C into ``sys.exit(1)``: it stays
    a ``KeyboardInterrupt`` (the command line says so)."""
    try:
        trainer.fit(module)
    except SystemExit as stop:
        if type(stop) is SystemExit and trainer.interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        close_case_loggers(trainer)


def attempt_rank(model: TestCaseModule, campaign: Campaign) -> tuple[bool, bool]:
    """How good a run's result is: found (the method's own stop rule held), then flipped by the SUT."""
    result = model.result
    if result.output is None or not model.has_origin:
        return False, False
    flipped = bool(campaign.sut.is_flipped(result.output, model.origin_output, model.target).all())
    return result.found, flipped


def run_case(campaign: Campaign, case: TestCase, folder: RunFolder, done: Done) -> None:
    """Build and fit one test case and write its record; any failure (build, NaN, OOM, ...) is recorded. Each run
    of the case (:class:`CaseRun`) is a fresh module and Trainer with the campaign's case callbacks."""
    run = CaseRun.start(campaign, case, folder, done)
    if run is None:
        return
    model: TestCaseModule | None = None
    try:
        overrides: dict | None = {}
        while overrides is not None:
            model = run.build(**overrides)
            kwargs = campaign.trainer_kwargs(case)
            kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), *campaign.case_callbacks()]
            trainer = L.Trainer(**kwargs)
            guarded_fit(trainer, model)
            overrides = run.ended(model, trainer.global_step)
    except Exception as error:  # a failing case is recorded, the campaign goes on
        run.finish(model, error)
        return
    run.finish()


def run_batched_cases(campaign: Campaign, cases: Sequence[TestCase], folder: RunFolder, done: Done) -> None:
    """Run ``cases`` ``cases.batch_size`` at a time in the method's batched module; each case's record is written
    (as by :func:`run_case`) the moment its last run leaves its slot, in the order the cases end. Each run of a case
    (:class:`CaseRun`: its origin, target and fresh weights, seeded as at batch size 1) is built and set up when it
    takes a slot. A free slot takes, in this order: the next run of a case whose run ended without its result; the
    next planned case; and, once none is planned, a later run of a case still running whose run ended without its
    result (:meth:`CaseRun.spare`, with ``cases.spare_slots``): its next targets run side by side, the first result
    found ends the case, and every evaluation its runs spent is counted. A run that fails there is recorded at once.
    A failure of the batch's shared step ends the cases then in the batch with that error, and the remaining cases
    go on in a fresh module and Trainer."""
    planned: Iterator[TestCase] = iter(cases)
    runs: dict[int, CaseRun] = {}  # id(module) -> the case of each run in a slot
    open_runs: list[CaseRun] = []  # the cases with a run in a slot, in the order they started
    again: list[TestCaseModule] = []  # the next runs of cases that left their slot without their result
    spare_slots = campaign.selection.spare_slots

    def set_up(run: CaseRun, **overrides: Any) -> TestCaseModule | None:
        model: TestCaseModule | None = None
        try:
            model = run.build(**overrides)
            model.setup("fit")
        except Exception as error:  # a failing case is recorded, the campaign goes on
            if model is not None:
                run.forget(model)
            settle(run, model, error)
            return None
        runs[id(model)] = run
        if run not in open_runs:
            open_runs.append(run)
        return model

    def settle(run: CaseRun, model: TestCaseModule | None, error: BaseException) -> None:
        run.failed(model, error, 0)
        if run.settled:
            finish(run)

    def finish(run: CaseRun) -> None:
        if run in open_runs:
            open_runs.remove(run)
        run.finish()

    def write(model: TestCaseModule, steps: int, error: BaseException | None) -> None:
        run = runs.pop(id(model))
        if error is not None:
            run.failed(model, error, steps)
            overrides = None
        else:
            overrides = run.ended(model, steps)
        nxt = set_up(run, **overrides) if overrides is not None else None
        if nxt is not None:
            again.append(nxt)
        if error is None and not run.over:  # say why the case is still running
            console.run_missed(run.case.case_id, run.number(model), run.attempts[-1],
                               None if nxt is None else run.number(nxt), None if nxt is None else nxt.attempt_summary(),
                               len(run.live))
        if run.settled and run in open_runs:
            finish(run)

    def spare() -> TestCaseModule | None:
        for run in sorted(open_runs, key=lambda r: len(r.live)):  # the case with the fewest runs in slots first
            if (overrides := run.spare()) is not None and (model := set_up(run, **overrides)) is not None:
                console.spare_run(run.case.case_id, run.number(model), model.attempt_summary())
                return model
        return None

    def next_case() -> TestCaseModule | None:
        while again:
            model = again.pop(0)
            if model.stop_reason is None:
                return model
            run = runs.pop(id(model))  # its case ended before it took a slot: it never ran
            run.forget(model)
            if run.settled and run in open_runs:
                finish(run)
        for case in planned:
            run = CaseRun.start(campaign, case, folder, done)
            if run is not None and (model := set_up(run)) is not None:
                return model
        return spare() if spare_slots else None

    def spent(model: TestCaseModule) -> int:
        return runs[id(model)].sut_evals

    while (first := next_case()) is not None:
        try:
            batch = type(first).batched_module()(first, next_case, write, slots=campaign.selection.batch_size,
                                                 max_steps=campaign.trainer.max_steps, max_evals=campaign.budget,
                                                 spent=spent)
        except Exception as error:
            write(first, 0, error)
            continue
        try:
            kwargs = campaign.trainer_kwargs(runs[id(first)].case, campaign.output.name)
            kwargs.update(max_steps=-1, max_epochs=1)  # the batch ends when its last case does
            guarded_fit(L.Trainer(**kwargs), batch)
        except Exception as error:  # the cases in the batch take the error; the campaign goes on
            batch.fail_active(error)
        if batch.active:  # cannot happen (a batch's fit ends with its last case), but never lose a case
            batch.fail_active(RuntimeError("the batch's fit ended before its cases"))


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

    Raises :class:`CampaignFailed` (after writing the summary and the grids) when a case run here failed, naming
    how many: the command exits 1. A case without a valid origin counts only when no case ran.
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
            run_batched_cases(campaign, mine, folder, done)
        else:
            for case in mine:
                run_case(campaign, case, folder, done)
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
    errors = [r for r in ran if r.error]
    failed = errors if len(errors) == len(ran) else [r for r in errors if r.is_case]  # no origin: no failure alone
    if failed:
        count = (f"every case failed ({len(ran)}/{len(ran)})" if len(failed) == len(ran)
                 else f"{len(failed)} of {len(ran)} cases failed")
        raise CampaignFailed(f"{count}; first error: {failed[0].error}")
    return summary


__all__ = ["CaseRun", "check_resumable", "guarded_fit", "run_batched_cases", "run_campaign", "run_case"]
