"""Experiment tracking of a whole campaign: one W&B run holding the table of its cases and its summary.

With a ``WandbLogger`` as ``trainer.logger``, every case logs its own run (``<run>/<case id>``) in the W&B group
``<run>``; after the last case, rank 0 adds a ``<run>/campaign`` run (job type ``campaign``) to the same group with a
``cases`` table (one row per case, origin and result images included) and the campaign summary: its numbers logged
as metrics through the logger (``log_metrics``: the run's history and summary), the rest (the method) in the run
summary.
Offline mode (``offline: true`` or ``WANDB_MODE=offline``) writes the same to ``<save_dir>/wandb/offline-run-*``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import WandbLogger

from hynea_pl.schema import CaseRecord

CASE_COLUMNS = ("case_id", "origin_class", "target", "flipped", "verdict", "sut_evals", "ms_ssim", "runtime_s",
                "origin", "result")


def is_wandb(logger: Any) -> bool:
    return hasattr(logger, "get") and str(logger.get("class_path", "")).endswith("WandbLogger")


def case_rows(records: Sequence[CaseRecord], run_dir: Path) -> list[list[Any]]:
    """One table row per case (``CASE_COLUMNS``), images as ``wandb.Image`` of the saved PNGs (``None`` if none)."""
    import wandb

    def image(relative: str | None, caption: str) -> Any:
        return wandb.Image(str(run_dir / relative), caption=caption) if relative else None

    rows = []
    for r in records:
        verdict = r.verdict or ("error" if r.error else None)
        rows.append([r.case_id, r.origin_class, r.target, r.flipped, verdict, r.sut_evals, r.ms_ssim, r.runtime_s,
                     image(r.origin_image, f"{r.case_id} origin ({r.origin_label})"),
                     image(r.result_image, f"{r.case_id} result ({r.result_label})")])
    return rows


def close_case_loggers(trainer: Any) -> None:
    """Finish a case's W&B run once its fit ended, so the next case starts its own."""
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()


def track_campaign(trainer: Any, run_name: str, records: Sequence[CaseRecord], run_dir: Path,
                   summary: dict[str, Any]) -> None:
    """Log the campaign's case table and summary to W&B when the trainer's logger is a ``WandbLogger``: the
    summary's numbers as metrics, its other values (the method's name) in the run summary."""
    logger_cfg = trainer.get("logger")
    if not is_wandb(logger_cfg):
        return
    from jsonargparse.typing import import_object

    given = logger_cfg.get("init_args")
    init_args = given.as_dict() if hasattr(given, "as_dict") else dict(copy.deepcopy(given or {}))
    init_args.update(name=f"{run_name}/campaign", group=init_args.get("group") or run_name, job_type="campaign")
    init_args.pop("version", None)
    init_args.pop("id", None)
    logger = import_object(logger_cfg.class_path)(**init_args)
    try:
        logger.log_table(key="cases", columns=list(CASE_COLUMNS), data=case_rows(records, Path(run_dir)))
        numbers = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        logger.log_metrics(numbers)
        logger.experiment.summary.update({k: v for k, v in summary.items() if v is not None and k not in numbers})
    finally:
        logger.experiment.finish()


__all__ = ["CASE_COLUMNS", "case_rows", "close_case_loggers", "is_wandb", "track_campaign"]
