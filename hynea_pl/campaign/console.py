"""What a campaign prints: the resume note, one line per case, the progress status and the summary."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hynea_pl.campaign.summary import summary_table
from hynea_pl.data import LabelledImages
from hynea_pl.schema import CaseRecord
from hynea_pl.verdicts import AMBIGUOUS, DEGRADED, SEMANTIC_CHANGE, UNACCEPTED, VALID_FAILURE, reading_name

console = Console()
#: a case's line when the SUT flipped on a result its method did not accept (verdict ``unaccepted``)
UNACCEPTED_TEXT = "[dim]no accepted result (best try kept)[/]"


def resuming(path: Path, n_done: int, n_failed: int = 0) -> None:
    retried = f"; {n_failed} failed case(s) are run again" if n_failed else ""
    console.print(f"resuming {path}: {n_done} case(s) already recorded are kept{retried}", soft_wrap=True)


def images_read(source: str, images: LabelledImages) -> None:
    """One line: what ``cases.images`` gave (images read, files skipped and converted, by reason)."""
    def counts(what: dict[str, int]) -> str:
        return ", ".join(f"{n} {reason}" for reason, n in sorted(what.items())) or "none"

    console.print(f"test images from {escape(source)}: {len(images.labels)} read; skipped: {counts(images.skipped)}; "
                  f"converted: {counts(images.converted)}", soft_wrap=True)


def describe(index: int, total: int, record: CaseRecord) -> str:
    """A case's line (rich markup): its outcome, the judges' readings, its cost."""
    origin = f"from {record.origin_source}" if record.origin_source else f"seed {record.seed}"
    head = f"[{index}/{total}] {record.case_id} {origin}"
    if record.error:
        return f"{head}: [red]error[/] {record.error}"
    if record.flipped:
        outcome = f"flipped to {record.result_label} at step {record.result_step}"
        if not record.target_reached:
            outcome += f" (target {record.target} not reached)"
    else:
        outcome = f"[yellow]not flipped[/] (predicts {record.result_label})"
    judged = {VALID_FAILURE: "[green]valid failure[/]", DEGRADED: "[yellow]degraded[/]",
              SEMANTIC_CHANGE: "[red]semantic change[/]", AMBIGUOUS: "[yellow]ambiguous[/]",
              UNACCEPTED: UNACCEPTED_TEXT}.get(record.verdict or "")
    if record.flipped and record.accepted is False and not judged:  # no oracle: still marked
        outcome += f" -> {UNACCEPTED_TEXT}"
    if judged:
        readings = " ".join(reading_name(label, short=True) for label in (
            record.judge_labels.values() if record.judge_labels else [record.oracle_result_label]))
        outcome += f" -> {judged} (judges read {readings})"
    if record.stability_variants:
        outcome += f", holds on {record.stability_held}/{record.stability_variants} variants"
    ssim = "-" if record.ms_ssim is None else f"{record.ms_ssim:.3f}"
    return f"{head}: {outcome}, {record.sut_evals} SUT evals, {record.runtime_s:.1f} s, MS-SSIM {ssim}"


def case_done(prefix: str, index: int, total: int, record: CaseRecord) -> None:
    """Print a case's line, behind this process's ``[rank r/n] `` prefix on a sharded campaign."""
    console.print(escape(prefix) + describe(index, total, record), soft_wrap=True)


def _run(number: int, summary: dict) -> str:
    target = summary.get("target")
    return f"run {number + 1}" + (f" (target {target})" if target is not None else "")


def run_missed(case_id: str, number: int, summary: dict, next_number: int | None, next_summary: dict | None,
               running: int) -> None:
    """A case's run ``number`` ended without its result: what it spent, why it stopped and what runs next."""
    then = (f"{_run(next_number, next_summary)} takes its slot" if next_summary is not None
            else f"{running} of its runs still in slots" if running else "no run left")
    console.print(f"  {escape(case_id)}: {_run(number, summary)} ended without an accepted result after "
                  f"{summary.get('steps')} steps ({summary.get('stop_reason')}, {summary.get('sut_evals')} SUT evals); "
                  f"{then}", soft_wrap=True, highlight=False)


def spare_run(case_id: str, number: int, summary: dict) -> None:
    """A case's later run started in a slot no planned case needs (``cases.spare_slots``)."""
    console.print(f"  {escape(case_id)}: {_run(number, summary)} starts in a free slot beside its other runs",
                  soft_wrap=True, highlight=False)


def status(flipped: int, valid: int, judged: bool) -> str:
    """The progress line's status: flips so far, and valid failures when an oracle judges."""
    return f"{flipped} flipped" + (f", {valid} valid failures" if judged else "")


def finished(method: str, run_name: str, summary: dict, path: Path) -> None:
    """The summary table and where the outputs are."""
    console.print(summary_table(f"{method} on {run_name}", summary))
    written = [name for name in ("records.jsonl", "summary.json", "grid.png", "cases/")
               if (path / name.rstrip("/")).exists() and (name != "cases/" or any((path / "cases").iterdir()))]
    console.print(f"outputs: {path}/ ({', '.join(written)})" if written else f"no case was recorded in {path}/")
    console.print(f"peak memory: {peak_memory_gb():.1f} GB (this process)")


def peak_memory_gb() -> float:
    """This process's peak resident memory so far, in GB (``ru_maxrss``: kilobytes on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1e9 if sys.platform == "darwin" else 1e6)


__all__ = ["case_done", "console", "describe", "finished", "peak_memory_gb", "resuming", "run_missed", "spare_run",
           "status"]
