"""The case loop at ``cases.batch_size > 1``: the method's batched module runs B cases at once in one Trainer; each
case's record is written the moment it leaves its slot, exactly as :func:`hynea_pl.campaign.runner.run_case`
writes it (:func:`hynea_pl.campaign.runner.finish_record`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import lightning as L

from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.records import RunFolder
from hynea_pl.campaign.outcome import case_error, finish_record, new_record, no_origin_error
from hynea_pl.campaign.tracking import close_case_loggers
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.schema import CaseRecord

if TYPE_CHECKING:
    from hynea_pl.campaign.campaign import Campaign


class _Started:
    """A case that took a slot: the case, its record so far and when it started."""

    def __init__(self, case: TestCase, record: CaseRecord, start: float) -> None:
        self.case, self.record, self.start = case, record, start


def run_batched_cases(campaign: Campaign, cases: Sequence[TestCase], folder: RunFolder,
                      done: Callable[[CaseRecord], None]) -> None:
    """Run ``cases`` ``cases.batch_size`` at a time; ``done`` gets each record once it is written (in the order
    the cases end). A case is built and set up (its origin, target and fresh weights, seeded as at batch size 1)
    when it takes a slot; one that fails there is recorded at once. A failure of the batch's shared step ends the
    cases then in the batch with that error, and the remaining cases go on in a fresh module and Trainer."""
    planned: Iterator[TestCase] = iter(cases)
    started: dict[int, _Started] = {}

    def finish(record: CaseRecord, start: float, model: TestCaseModule | None, steps: int,
               error: BaseException | None) -> None:
        if error is not None:
            record.error = case_error(error, record, folder)
        record.runtime_s = time.perf_counter() - start
        finish_record(campaign, record, model, steps, folder)
        done(record)

    def write(model: TestCaseModule, steps: int, error: BaseException | None) -> None:
        entry = started.pop(id(model))
        finish(entry.record, entry.start, model, steps, error)

    def next_case() -> TestCaseModule | None:
        for case in planned:
            record = new_record(case, campaign.output, campaign.sut.task, folder, campaign.generator)
            start = time.perf_counter()
            if case.seed is None:
                record.error = no_origin_error(campaign)
                folder.append(record)
                done(record)
                continue
            model: TestCaseModule | None = None
            try:
                L.seed_everything(case.seed, verbose=False)  # the case's fresh weights, as at batch size 1
                model = campaign.build_module(case)
                model.setup("fit")
            except Exception as error:  # a failing case is recorded, the campaign goes on
                finish(record, start, model, 0, error)
                continue
            started[id(model)] = _Started(case, record, start)
            return model
        return None

    while True:
        first = next_case()
        if first is None:
            return
        trainer: L.Trainer | None = None
        try:
            batch = type(first).batched_module()(first, next_case, write, slots=campaign.selection.batch_size,
                                                 max_steps=campaign.trainer.max_steps, max_evals=campaign.budget)
        except Exception as error:
            write(first, 0, error)
            continue
        try:
            kwargs = campaign.trainer_kwargs(started[id(first)].case, campaign.output.name)
            kwargs.update(max_steps=-1, max_epochs=1)  # the batch ends when its last case does
            trainer = L.Trainer(**kwargs)
            try:
                trainer.fit(batch)
            except SystemExit as stop:  # Lightning turns Ctrl-C into sys.exit(1): keep it an interrupt
                if type(stop) is SystemExit and trainer.interrupted:
                    raise KeyboardInterrupt from None
                raise
        except Exception as error:  # the cases in the batch take the error; the campaign goes on
            batch.fail_active(error)
        finally:
            if trainer is not None:
                close_case_loggers(trainer)
        if batch.active:  # cannot happen (a batch's fit ends with its last case), but never lose a case
            batch.fail_active(RuntimeError("the batch's fit ended before its cases"))


__all__ = ["run_batched_cases"]
