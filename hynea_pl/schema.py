"""The one record schema: what a campaign writes for every test case, for HyNeA and every baseline alike.

``records.jsonl`` holds one :class:`CaseRecord` per line. The campaign writes them, and ``evaluate``,
``compare``, ``replay`` and the report read them through :func:`read_records`, so every column has one meaning
whatever the method. A record of another ``schema_version``, an unknown field, a missing required field or a
value of the wrong type is a one-line :class:`RecordError` naming the file, the line and the field.

Meanings shared by every method (the SUT's task defines the tests, :mod:`hynea_pl.suts`):

- ``flipped``: the SUT's decision on the result *as saved* (the 8-bit PNG) left the origin's: another label
  (multiclass), the tested attribute's sign changed (binary), the suppressed class is gone from the top-k
  detections (detection); ``flipped_before_saving`` is the same decision on the float image the method produced;
- ``target_reached``: the result reached the case's ``target``: the target class (multiclass); for binary and
  detection, where the target *is* the change (an attribute to flip, a class to suppress), it equals ``flipped``;
- ``accepted``: the method's own success criterion held for the result (its stop rule, with every check it asks);
  false when the case ended without a result its method accepted: the image is then its best try, kept for
  inspection, and a flip on it is never a failure (verdict ``unaccepted``);
- ``sut_evals``: SUT evaluations spent, counting only images the SUT had not scored before in that case.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hynea_pl.verdicts import (
    RATE_KEYS, STABLE_FAILURE_RATE, STABLE_FLIP_RATE, VALID_FAILURE, VALID_FAILURE_RATE, VERDICT_CEILING, VERDICTS,
    Verdict,
)

#: Bump when a field is added, removed or changes meaning.
SCHEMA_VERSION = 8
#: Older versions still read, each as the current one with the fields it lacks at their defaults (version 2 had no
#: ``origin_boxes`` / ``result_boxes``; version 3 no per-judge labels, realism or saved-image fields, and its
#: ``flipped`` was the SUT's decision on the unsaved float image; version 4 no stability fields; version 5 no
#: real-image origin fields; version 6 no scene layout; version 7 no ``accepted``, and its verdict could call a flip
#: on a result its method did not accept a ``valid_failure``).
READABLE_VERSIONS = (2, 3, 4, 5, 6, 7, 8)

Task = Literal["multiclass", "binary", "detection"]

# ``Verdict``, the validity oracle's verdict on a case (judges that never steered the search, unanimous), is
# defined in :mod:`hynea_pl.verdicts` with its names and their meanings, and imported here.

#: ``summary.json``'s keys, in order: the record-only part of a run's metrics row the campaign writes at its end
#: (:func:`hynea_pl.campaign.summary.summarize_records`), each cost key naming the cases it averages.
SUMMARY_KEYS = ("method", "n_cases", "n_errors", "flip_rate", "target_reached_rate", "misclassification_rate",
                VALID_FAILURE_RATE, VERDICT_CEILING, *(key for key in RATE_KEYS.values() if key != VALID_FAILURE_RATE),
                STABLE_FLIP_RATE, STABLE_FAILURE_RATE, "escape_ratio", "confidence_reduction", "median_sut_evals_flipped",
                "mean_sut_evals_flipped", "median_sut_evals_all", "mean_sut_evals_all", "sut_evals_per_valid_failure",
                "sut_evals_per_stable_failure", "ended_before_budget_rate", "mean_runtime_s", "runtime_s_per_valid_failure",
                "median_ms_ssim",
                "median_ms_ssim_valid_failures", "median_ms_ssim_to_real", "realism_pass_origins", "realism_pass_results",
                "skipped_seeds", "skipped_files")
#: ``summary.json`` keys of older runs -> their current names (each cost key now says which cases it averages).
LEGACY_KEYS = {"median_sut_evals": "median_sut_evals_flipped", "mean_sut_evals": "mean_sut_evals_flipped"}


class RecordError(ValueError):
    """A record that does not match :class:`CaseRecord` (one line: file, line, field, problem)."""


class CaseRecord(BaseModel):
    """One test case's outcome (one line of ``records.jsonl``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    schema_version: Literal[8] = SCHEMA_VERSION
    # --- which case --------------------------------------------------------------------------------------------
    method: str = Field(description="method name: hynea, giftbench-low-1e-4, sinvad, ...")
    run: str = Field(description="run name (the run folder's name)")
    task: Task = Field(description="the SUT's task")
    case_id: str = Field(description="c<class>-<index>, or u-<index> for unconditional origins")
    seed: int | None = Field(description="seed of the origin's initial noise; null: no valid origin was found")
    origin_class: int | None = Field(description="conditioning class of the origin (null: unconditional)")
    skipped_seeds: int = Field(0, description="seeds drawn and rejected as invalid origins (paper 4.5)")
    # --- the SUT on origin and result ----------------------------------------------------------------------
    target: int | None = Field(None, description="target class / tested attribute / class to suppress")
    origin_label: int | None = Field(None, description="the SUT's decision on the origin (SUT.prediction)")
    result_label: int | None = Field(None, description="the SUT's decision on the result")
    origin_pred: list[Any] | None = Field(None, description="raw SUT output on the origin (logits)")
    result_pred: list[Any] | None = Field(None, description="raw SUT output on the result (logits)")
    flipped: bool = Field(False, description="the SUT's decision on the saved result left the origin's (see the "
                                             "module docstring)")
    flipped_before_saving: bool | None = Field(
        None, description="the same decision on the float result before it was saved as an 8-bit PNG")
    target_reached: bool = Field(False, description="the result reached the target")
    accepted: bool | None = Field(
        None, description="the method's own success criterion held for the result (CaseResult.found: its stop rule "
                          "with every check it asks); false: the case ended without a result its method accepted and "
                          "the image is its best try, kept for inspection; null: not recorded (older records)")
    confidence_reduction: float | None = Field(None, description="detection: paper eq. 15 on the result")
    origin_boxes: list[list[float]] | None = Field(
        None, description="detection: the SUT's top-k detections on the origin, most confident first, each "
                          "[x0, y0, x1, y1, class, confidence] in the saved image's pixels")
    result_boxes: list[list[float]] | None = Field(None, description="detection: the same on the result")
    # --- the validity oracle (independent judges, never the model that steered the search) -------------------------
    oracle_origin_label: int | None = Field(None, description="the judges' decision on the origin")
    oracle_result_label: int | None = Field(None, description="the judges' decision on the result")
    oracle_result_confidence: float | None = Field(None, description="the judges' probability of that decision")
    judge_labels: dict[str, int] | None = Field(
        None, description="each judge's most probable reading of the result, by judge name (-2: not a digit); the "
                          "verdict takes the judges' vote")
    origin_realistic: bool | None = Field(None, description="the origin passes the realism test")
    realistic: bool | None = Field(None, description="the result passes the realism test (null: no test)")
    realism_score: float | None = Field(
        None, description="the result's typicality score: the largest percentile of its nearest-real-image "
                          "distance among held-out real images' (pixel and embedding space)")
    verdict: Verdict | None = Field(None, description=" / ".join(VERDICTS))
    # --- the stability verdict (hynea_pl.evaluation.stability): the SUT again on variants of the saved result -----
    stability_variants: int | None = Field(
        None, description="how many semantics-preserving variants of the saved result the SUT was asked about "
                          "(the config's stability section: shifts, rotations, brightness changes, a blur; null: the "
                          "case did not flip or no check)")
    stability_held: int | None = Field(
        None, description="on how many of them the SUT's decision still left the origin's")
    # --- cost ------------------------------------------------------------------------------------------------
    sut_evals: int = Field(0, description="SUT evaluations of images not scored before in this case")
    steps: int = Field(0, description="optimisation steps (HyNeA) or generations (population searches)")
    result_step: int | None = Field(None, description="the 1-based step that produced the result image")
    runtime_s: float = Field(0.0, description="wall seconds of the case, build and fit")
    # --- images ----------------------------------------------------------------------------------------------
    ms_ssim: float | None = Field(None, description="MS-SSIM(result, origin), scales chosen for the image size")
    distance: float | None = Field(None, description="the Frobenius image distance HyNeA minimises")
    origin_image: str | None = Field(None, description="PNG path relative to the run folder")
    result_image: str | None = None
    diff_image: str | None = None
    adapter: str | None = Field(None, description="saved HyperNet + projector folder (replay), relative")
    # --- an origin from a real image (cases.images; all null for an origin sampled from its seed) ------------
    origin_source: str | None = Field(
        None, description="the real image the origin reconstructs: its path in cases.images, or held_out/<index>")
    real_image: str | None = Field(None, description="that real image as the SUT and generator read it (PNG)")
    origin_noise: str | None = Field(
        None, description="the inversion's initial noise (safetensors, relative): what replay starts from")
    inversion_error: float | None = Field(
        None, description="RMS error of the origin's latent to the real image's latent, relative to its RMS")
    inversion_ms_ssim: float | None = Field(None, description="MS-SSIM(origin, real image): the inversion's fidelity")
    real_ms_ssim: float | None = Field(None, description="MS-SSIM(result, real image)")
    # --- a scene drawn from a layout (LayoutSceneGenerator; null otherwise) ----------------------------------
    layout: dict[str, Any] | None = Field(
        None, description="the scene's layout: canvas size, digit classes, squares [x, y, side] and the origin's ink "
                          "boxes [x0, y0, x1, y1]; replay checks it against the layout its seed draws")
    # --- method-specific and failures ----------------------------------------------------------------------
    diagnostics: dict[str, Any] = Field(default_factory=dict, description="method-specific numbers")
    error: str | None = Field(None, description="why the case failed (build, NaN, OOM, ...); null: it ran")

    @property
    def is_case(self) -> bool:
        """A test case is a record with a valid origin (records with ``seed`` null only count skipped seeds)."""
        return self.seed is not None

    @property
    def is_valid_failure(self) -> bool:
        """The verdict calls the result a valid failure on a result its method accepted (the one test of a valid
        failure: a record written by hand that calls a result its method refused valid is not one)."""
        return self.verdict == VALID_FAILURE and self.accepted is not False

    @property
    def stable(self) -> bool | None:
        """The failure holds on every stability variant (``None``: not checked)."""
        if self.stability_variants is None or self.stability_held is None:
            return None
        return self.stability_held == self.stability_variants

    @property
    def ok(self) -> bool:
        """The case ran without error."""
        return not self.error

    def to_json(self) -> str:
        return self.model_dump_json()


def _one_line(error: ValidationError, where: str) -> str:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "<record>"
    problem = {"extra_forbidden": "unknown field", "missing": "missing field"}.get(first["type"], first["msg"])
    return f"{where}: field '{field}': {problem}"


def parse_record(data: dict[str, Any] | str, where: str = "record") -> CaseRecord:
    """A :class:`CaseRecord` from a dict or a JSON line; :class:`RecordError` (one line) when it does not fit."""
    try:
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict):
            raise RecordError(f"{where}: not a JSON object")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise RecordError(f"{where}: schema_version {version!r}, this hynea_pl reads versions "
                              f"{', '.join(map(str, READABLE_VERSIONS))}")
        return CaseRecord.model_validate({**data, "schema_version": SCHEMA_VERSION})
    except json.JSONDecodeError as error:
        raise RecordError(f"{where}: invalid JSON ({error.msg})") from None
    except ValidationError as error:
        raise RecordError(_one_line(error, where)) from None


def read_records(path: Path | str) -> list[CaseRecord]:
    """Every record of a ``records.jsonl`` (blank lines skipped); a bad line is a one-line :class:`RecordError`."""
    path = Path(path)
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if line.strip():
                records.append(parse_record(line, f"{path}:{number}"))
    return records


def write_records(path: Path | str, records: Iterable[CaseRecord]) -> None:
    """Write records as JSON lines (tests and tools; the campaign appends through its run folder)."""
    Path(path).write_text("".join(record.to_json() + "\n" for record in records), encoding="utf-8")


__all__ = ["LEGACY_KEYS", "READABLE_VERSIONS", "SCHEMA_VERSION", "SUMMARY_KEYS", "CaseRecord", "RecordError", "Task",
           "Verdict", "parse_record", "read_records", "write_records"]
