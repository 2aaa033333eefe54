"""Progress of a counted loop that reads well in a terminal (a rich bar) and in a log file (a plain line at most
every few seconds), and a Lightning progress-bar callback that drives it over the optimisation steps."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ProgressBar
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
)


#: The stderr console progress goes to by default; sharing it lets bars nest (a zoo build inside an origins loop).
stderr_console = Console(stderr=True)


def format_seconds(seconds: float) -> str:
    """``12 s``, ``3 min 05 s``, ``2 h 04 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class StepProgress:
    """Progress over ``total`` units: a rich bar (``n/total``, ETA) on a terminal, otherwise one plain line at
    most every ``interval_s`` seconds and a final line, e.g. ``zoo sut: step 120/800 (15%), 12 s elapsed, ETA 68 s``.

    Use as a context manager, or call :meth:`close` when done. ``clock`` (seconds) is injectable for tests.
    """

    def __init__(self, description: str, total: int, unit: str = "step", interval_s: float = 5.0,
                 console: Console | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.description, self.total, self.unit, self.interval_s = description, int(total), unit, interval_s
        self.console = console if console is not None else stderr_console
        self.completed = 0
        self.status = ""
        self._clock = clock
        self._start = self._last_line = clock()
        self._finished = self._closed = False
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if (self.console.is_interactive and self.console.is_terminal) or self.console.is_jupyter:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(escape(unit)),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("{task.fields[status]}", markup=False), console=self.console,
            )
            self._task = self._bar.add_task(escape(description), total=max(self.total, 0) or None, status="")
            self._bar.start()

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def set_status(self, text: str) -> None:
        """A short text shown after the counts (e.g. ``loss=0.123``)."""
        self.status = text
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, status=text)

    def set_total(self, total: int) -> None:
        """The number of units, when it is known only once the loop has started."""
        self.total = int(total)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=max(self.total, 0) or None)

    def update(self, n: int = 1) -> None:
        """Advance by ``n`` units."""
        if self._closed:
            return
        self.completed += n
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.completed)
            return
        now = self._clock()
        if 0 < self.total <= self.completed:
            self._print_final(now)
        elif now - self._last_line >= self.interval_s:
            self._last_line = now
            self.console.print(self.line(now), markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the bar, or print the final line (``done`` or ``stopped``) if not printed yet."""
        if self._closed:
            return
        if self._bar is not None:
            self._bar.stop()
        else:
            self._print_final(self._clock())
        self._closed = True

    def line(self, now: float | None = None) -> str:
        """The plain progress line at ``now`` (default: the clock)."""
        elapsed = (self._clock() if now is None else now) - self._start
        text = f"{self.description}: {self.unit} {self.completed}/{self.total}"
        if self.total > 0:
            text += f" ({math.floor(100 * min(self.completed, self.total) / self.total)}%)"
        if self._finished:
            done = self.total <= 0 or self.completed >= self.total
            text += f", {'done in' if done else 'stopped after'} {format_seconds(elapsed)}"
        elif self.total > 0 and self.completed > 0:
            eta = elapsed / self.completed * max(self.total - self.completed, 0)
            text += f", {format_seconds(elapsed)} elapsed, ETA {format_seconds(eta)}"
        else:
            text += f", {format_seconds(elapsed)} elapsed"
        return f"{text}, {self.status}" if self.status else text

    def _print_final(self, now: float) -> None:
        if not self._finished:
            self._finished = True
            self.console.print(self.line(now), markup=False, highlight=False, soft_wrap=True)


class StepProgressBar(ProgressBar):
    """A Lightning progress bar over the optimisation steps (``trainer.max_steps``, else the estimated total),
    shown by a :class:`StepProgress` named ``description``, with the metrics logged with ``prog_bar=True``."""

    def __init__(self, description: str = "fit", interval_s: float = 5.0, console: Console | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.description, self.interval_s, self.console, self.clock = description, interval_s, console, clock
        self.progress: StepProgress | None = None
        self._enabled = True
        self._seen_steps = 0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args: Any, **kwargs: Any) -> None:
        (self.console or stderr_console).print(*args, **kwargs)

    @staticmethod
    def total_steps(trainer: pl.Trainer) -> int:
        """The optimisation steps the fit will take (0 if unknown)."""
        if trainer.max_steps is not None and trainer.max_steps > 0:
            return int(trainer.max_steps)
        estimated = trainer.estimated_stepping_batches
        return int(estimated) if math.isfinite(estimated) else 0

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._enabled:
            return
        self._seen_steps = trainer.global_step
        self.progress = StepProgress(self.description, self.total_steps(trainer), "step", self.interval_s,
                                     self.console, clock=self.clock)
        if trainer.global_step:  # resumed from a checkpoint
            self.progress.update(trainer.global_step)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.progress is None:
            return
        metrics = self.get_metrics(trainer, pl_module)
        self.progress.set_status(", ".join(f"{k}={_short(v)}" for k, v in metrics.items()))
        if trainer.global_step > self._seen_steps:
            self.progress.update(trainer.global_step - self._seen_steps)
            self._seen_steps = trainer.global_step

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.teardown_progress()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self.teardown_progress()

    def teardown_progress(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None


def _short(value: Any) -> str:
    if hasattr(value, "item"):
        value = value.item()
    return f"{value:.4g}" if isinstance(value, float) else str(value)
