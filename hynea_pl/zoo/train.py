"""The zoo's training loop: every trained component is a LightningModule fitted by a Trainer on CPU, with its
progress shown on stderr (``zoo <name>: step n/total``)."""

from __future__ import annotations

import logging
import time
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from hynea_pl.progress import StepProgressBar, stderr_console

console = stderr_console


def fit(module: L.LightningModule, dataset: TensorDataset, batch_size: int, max_steps: int, seed: int,
        callbacks: list[L.Callback] | None = None, name: str = "component") -> float:
    """Fit ``module`` for ``max_steps`` optimiser steps on shuffled batches (of at most the dataset's size), showing
    ``zoo <name>: step n/total`` (a bar on a terminal, a line every few seconds otherwise); returns wall seconds."""
    L.seed_everything(seed, verbose=False)
    loader = DataLoader(  # a split smaller than a batch (a small folder of images) is one batch
        dataset, batch_size=min(batch_size, len(dataset)), shuffle=True, drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )
    lightning_log = logging.getLogger("lightning.pytorch")  # "GPU available: ...", "Trainer.fit stopped: ..."
    level = lightning_log.level
    lightning_log.setLevel(logging.WARNING)
    try:
        trainer = L.Trainer(
            max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
            enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0, enable_progress_bar=True,
            callbacks=[*(callbacks or []), StepProgressBar(f"zoo {name}", console=console)],
        )
        start = time.perf_counter()
        with warnings.catch_warnings():  # lightning 2.6 calls a pytree API torch 2.14 deprecates: nothing to act on
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
            trainer.fit(module, loader)
        return time.perf_counter() - start
    finally:
        lightning_log.setLevel(level)
