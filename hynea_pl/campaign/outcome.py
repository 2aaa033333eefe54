"""A case's record: created before it runs, assembled from what its module returned
(:meth:`TestCaseModule.case_outcome`) or from the error that ended it, then written (the single and the batched case
loop alike).

The SUT decides flips on the result as saved (8-bit PNG) and on its stability variants, the ``oracle`` (when configured) and the ``realism``
test give the validity verdict; the case's images (and, for a flipped case, its adapter) go into the run folder.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

import torch

from hynea_pl import errors
from hynea_pl.campaign import console
from hynea_pl.campaign.case_types import TestCase
from hynea_pl.campaign.config import RunOutput
from hynea_pl.campaign.records import RunFolder
from hynea_pl.errors import one_line
from hynea_pl.evaluation.judge import judge_case
from hynea_pl.evaluation.stability import StabilityVariants, stability_fields
from hynea_pl.generators import Generator
from hynea_pl.images import as_saved, load_image
from hynea_pl.methods.base import CaseOutcome, TestCaseModule
from hynea_pl.metrics import ms_ssim
from hynea_pl.metrics.functional import task as FT
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.objectives import frobenius_distance
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import SUT

if TYPE_CHECKING:
    from hynea_pl.campaign.campaign import Campaign


def new_record(case: TestCase, output: RunOutput, task: str, folder: RunFolder | None = None,
               generator: Generator | None = None) -> CaseRecord:
    """A case's record before it runs: who, which case, which origin. A case from a real image also gets its
    source and inversion quality, and (with ``folder``) its real image and inversion noise saved; a scene case
    (with ``generator``) its layout (:meth:`~hynea_pl.generators.Generator.describe_condition`)."""
    record = CaseRecord(method=output.method, run=output.name, task=task, case_id=case.case_id, seed=case.seed,
                        origin_class=case.origin_class, skipped_seeds=case.skipped_seeds, origin_source=case.source)
    if generator is not None and case.condition is not None and case.seed is not None:
        noise = case.noise if case.noise is not None else generator.initial_noise(case.seed)
        record.layout = generator.describe_condition(case.condition, noise.to(generator.device))
    if case.inversion is not None:
        record.inversion_error = case.inversion["latent_error"]
        record.inversion_ms_ssim = case.inversion["ms_ssim"]
    if folder is not None and case.real is not None and case.noise is not None:
        for key, path in folder.save_real_origin(case.case_id, case.real[0], case.noise).items():
            setattr(record, key, path)
    return record


def _pred(output: torch.Tensor) -> list:
    return output[0].detach().float().cpu().tolist()


def fill_outcome(record: CaseRecord, outcome: CaseOutcome, sut: SUT, folder: RunFolder, oracle: SUT | None = None,
                 realism: TypicalityTest | None = None, stability: StabilityVariants | None = None) -> None:
    """Write what a fitted (or failed) case returned into its record; ``sut`` decides flips on the result as
    saved, the ``oracle`` (when configured) and the ``realism`` test the validity verdict, and ``stability`` the
    variants a flip must hold on (:mod:`hynea_pl.evaluation.stability`)."""
    record.sut_evals = int(outcome.sut_evals)
    if outcome.diagnostics_error is not None:
        raise outcome.diagnostics_error
    record.diagnostics = outcome.diagnostics
    if outcome.stop_reason is not None:  # noted by the callbacks (hynea_pl.callbacks.stop), the same for every method
        record.diagnostics["stop_reason"] = outcome.stop_reason
    if not outcome.has_origin:  # the case failed before its origin existed
        return
    origin_output, target = outcome.origin_output, outcome.target
    record.target = int(target[0])
    record.origin_pred = _pred(origin_output)
    record.origin_label = int(sut.prediction(origin_output)[0])
    result = outcome.result
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
    record.accepted = bool(result.found)  # false: no result its method accepted, the image is its best try
    record.target_reached = bool(sut.reaches_target(output, origin_output, target)[0])
    record.result_step = result.step
    for key, value in stability_fields(sut, stability, saved, origin_output, target, record.flipped).items():
        setattr(record, key, value)
    origin, image = outcome.origin_image.cpu(), saved.cpu()
    # the task's own fields (detection: confidence reduction, and the boxes the galleries draw, paper Fig. 6)
    for key, value in sut.decision_fields(origin_output, output, target, outcome.origin_image, saved, FT).items():
        setattr(record, key, value)
    record.ms_ssim = float(ms_ssim(image, origin))
    if record.real_image is not None:  # the real image this origin reconstructs, as saved (a grey PNG has 3 equal
        real = load_image(folder.path / record.real_image)[: image.shape[1]]  # channels: keep the image's)
        record.real_ms_ssim = float(ms_ssim(image, real[None]))
    record.distance = float(frobenius_distance(origin, image))
    for key, path in folder.save_case_images(record.case_id, origin[0], image[0]).items():
        setattr(record, key, path)
    if oracle is not None:
        for key, value in judge_case(oracle, record, origin, image, realism).items():
            setattr(record, key, value)
    if record.flipped:
        directory, relative = folder.adapter_dir(record.case_id)
        if outcome.save_adapter(directory):
            record.adapter = relative


def no_origin_error(campaign: Campaign) -> str:
    """The ``error`` of a case none of whose seeds gave a valid origin."""
    return f"no valid origin in {campaign.selection.max_seed_tries} seeds"


def error_text(error: BaseException) -> str:
    """The exception's type and its first line."""
    return f"{type(error).__name__}: {one_line(error)}"


def case_error(error: BaseException, record: CaseRecord, folder: RunFolder) -> str:
    """A failed case's ``error``: :func:`error_text` and the file that keeps the full traceback
    (:meth:`RunFolder.write_traceback`), which ``--debug`` also prints."""
    trace = "".join(traceback.format_exception(error))
    path = folder.write_traceback(record.case_id, trace)
    if errors.DEBUG:
        console.console.print(f"{record.case_id}: {error_text(error)}\n{trace}", markup=False, highlight=False)
    return f"{error_text(error)} (traceback: {path})"


def finish_record(campaign: Campaign, record: CaseRecord, model: TestCaseModule | None, steps: int,
                  folder: RunFolder, attempts: list[dict] | None = None) -> None:
    """Write what the case's module returned (:meth:`TestCaseModule.case_outcome`) into ``record`` through
    :func:`fill_outcome` and append it to the run folder (the single and the batched path alike); ``attempts``: each
    run of a case that ran more than once (``diagnostics.attempts``)."""
    record.steps = steps
    if model is not None:
        try:
            fill_outcome(record, model.case_outcome(), campaign.sut, folder, campaign.oracle, campaign.realism,
                         campaign.stability)
        except Exception as error:
            record.error = record.error or case_error(error, record, folder)
    if attempts:
        record.diagnostics = {**(record.diagnostics or {}), "attempts": attempts}
    folder.append(record)


__all__ = ["case_error", "error_text", "fill_outcome", "finish_record", "new_record", "no_origin_error"]
