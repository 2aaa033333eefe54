"""StepProgress: bounded plain lines off a terminal, a bar on one; StepProgressBar over a Lightning fit."""

from __future__ import annotations

import io

import lightning as L
import pytest
import torch
from rich.console import Console
from torch.utils.data import DataLoader, TensorDataset

from hynea_pl.progress import StepProgress, StepProgressBar, format_seconds


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def plain_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=False, width=80), out


def lines(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if line.strip()]


def test_fast_loop_prints_only_the_final_line():
    console, out = plain_console()
    clock = FakeClock()
    with StepProgress("zoo sut", 1000, interval_s=5.0, console=console, clock=clock) as progress:
        for _ in range(1000):
            clock.now += 0.002
            progress.update()
    printed = lines(out)
    assert len(printed) == 1, printed
    assert printed[0].startswith("zoo sut: step 1000/1000 (100%), done in 2 s"), printed


def test_slow_loop_prints_at_the_interval_with_eta():
    console, out = plain_console()
    clock = FakeClock()
    progress = StepProgress("origins", 30, unit="origin", interval_s=5.0, console=console, clock=clock)
    for _ in range(30):
        clock.now += 1.0  # 30 s in all: a line at 5, 10, 15, 20, 25 s, then the final one
        progress.update()
    progress.close()
    printed = lines(out)
    assert len(printed) == 6, printed
    assert printed[0] == "origins: origin 5/30 (16%), 5 s elapsed, ETA 25 s"
    assert printed[-1] == "origins: origin 30/30 (100%), done in 30 s"
    progress.close()
    assert len(lines(out)) == 6, "close is idempotent"


def test_interrupted_loop_says_stopped_and_status_is_shown():
    console, out = plain_console()
    clock = FakeClock()
    with pytest.raises(KeyboardInterrupt):
        with StepProgress("zoo ldm", 800, console=console, clock=clock) as progress:
            progress.set_status("loss=0.5")
            progress.update(120)
            clock.now += 12
            raise KeyboardInterrupt
    assert lines(out) == ["zoo ldm: step 120/800 (15%), stopped after 12 s, loss=0.5"]


def test_terminal_console_shows_a_bar_with_counts():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, force_interactive=True, width=100)
    with StepProgress("zoo sut", 8, console=console) as progress:
        progress.set_status("loss=0.3")
        for _ in range(8):
            progress.update()
    text = out.getvalue()
    assert "━" in text and "ETA" in text and "loss=0.3" in text, repr(text)
    assert "8/8" in text and "zoo sut" in text
    assert "done in" not in text, "a terminal gets the bar, not the plain lines"


def test_bars_nest_on_one_terminal_console():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, force_interactive=True, width=100)
    with StepProgress("origins", 2, unit="origin", console=console) as outer:
        for _ in range(2):
            with StepProgress("zoo sut", 4, console=console) as inner:
                inner.update(4)
            outer.update()
    assert "4/4" in out.getvalue() and "2/2" in out.getvalue()


@pytest.mark.parametrize("seconds, text", [(4.4, "4 s"), (65, "1 min 05 s"), (7500, "2 h 05 min")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        (x,) = batch
        loss = self.layer(x).pow(2).mean()
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_callback_counts_optimisation_steps_not_epochs(capsys):
    console, out = plain_console()
    bar = StepProgressBar("zoo tiny", console=console)
    trainer = L.Trainer(
        max_steps=7, max_epochs=-1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_model_summary=False, enable_progress_bar=True, callbacks=[bar],
    )
    loader = DataLoader(TensorDataset(torch.randn(6, 2)), batch_size=2)  # 3 batches an epoch: 3 epochs
    trainer.fit(Tiny(), loader)
    text = out.getvalue()
    assert trainer.global_step == 7
    assert "zoo tiny: step 7/7 (100%)" in text and "loss=" in text, text
    assert len(lines(out)) == 1, text
    captured = capsys.readouterr()
    for stream in (text, captured.out, captured.err):
        assert "/-2" not in stream and "Epoch" not in stream, stream
