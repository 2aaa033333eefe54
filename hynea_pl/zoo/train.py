"""The zoo's training loop: every trained component is a LightningModule fitted by a Trainer, on the CPU unless a
build asks for another accelerator (:func:`training_accelerator`), with its progress shown on stderr
(``zoo <name>: step n/total``). What a build measures after training (the gates) runs on the CPU."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from hynea_pl.progress import StepProgressBar, stderr_console

console = stderr_console

#: the Trainer's ``accelerator`` for the zoo's training (:func:`training_accelerator`)
_accelerator = "cpu"


class AcceleratorUnavailable(ValueError):
    """The accelerator a build asks for is not on this machine (a one-line message)."""


def check_accelerator(accelerator: str) -> str:
    """``accelerator`` (Lightning's flag: ``cpu``, ``gpu``, ``cuda``, ``mps``, ``auto``) if one device of it is here,
    else :class:`AcceleratorUnavailable` saying what is."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    if accelerator not in {"auto", "gpu", *AcceleratorRegistry}:
        raise AcceleratorUnavailable(f"--accelerator {accelerator!r}: choose one of cpu, gpu, cuda, mps, auto")
    try:
        with _quiet_lightning():
            L.Trainer(accelerator=accelerator, devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    except Exception as error:  # lightning's MisconfigurationException, or a backend's RuntimeError
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise AcceleratorUnavailable(f"--accelerator {accelerator}: not available on this machine ({first})") from None
    return accelerator


@contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Lightning's info lines ("GPU available: ...", "Trainer.fit stopped: ...") kept off the console."""
    lightning_log = logging.getLogger("lightning.pytorch")
    level = lightning_log.level
    lightning_log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        lightning_log.setLevel(level)


@contextmanager
def training_accelerator(accelerator: str = "cpu") -> Iterator[None]:
    """Fit the zoo's components on one device of ``accelerator`` inside the block (``zoo build --accelerator``).
    A component's cache key does not name the accelerator: weights trained on a GPU differ from the CPU's by float
    rounding, as two CPUs' do."""
    global _accelerator
    previous, _accelerator = _accelerator, check_accelerator(accelerator)
    try:
        yield
    finally:
        _accelerator = previous


def fit(module: L.LightningModule, dataset: Dataset, batch_size: int, max_steps: int, seed: int,
        callbacks: list[L.Callback] | None = None, name: str = "component") -> float:
    """Fit ``module`` for ``max_steps`` optimiser steps on shuffled batches (of at most the dataset's size), showing
    ``zoo <name>: step n/total`` (a bar on a terminal, a line every few seconds otherwise); returns wall seconds."""
    L.seed_everything(seed, verbose=False)
    loader = DataLoader(  # a split smaller than a batch (a small folder of images) is one batch
        dataset, batch_size=min(batch_size, len(dataset)), shuffle=True, drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )
    with _quiet_lightning():
        trainer = L.Trainer(
            max_steps=max_steps, max_epochs=-1, accelerator=_accelerator, devices=1, logger=False,
            enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0, enable_progress_bar=True,
            callbacks=[*(callbacks or []), StepProgressBar(f"zoo {name}", console=console)],
        )
        start = time.perf_counter()
        with warnings.catch_warnings():  # lightning 2.6 calls a pytree API torch 2.14 deprecates: nothing to act on
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
            trainer.fit(module, loader)
        return time.perf_counter() - start
