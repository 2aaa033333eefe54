"""The SUT's fine-tuning on its failures as a ``LightningModule``: every batch mixes failures (or, for the control,
as many real images drawn at random) with real training images, so that the model does not forget; a callback stops
it before it forgets (:class:`ForgettingStop`)."""

from __future__ import annotations

import copy

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy

from hynea_pl.suts import SUT
from hynea_pl.zoo.augment import random_shift


class RepairModule(L.LightningModule):
    """Fine-tunes ``sut.model``: its dropout on while it trains (``dropout``), as the SUT was trained, off when it is
    checked; a model with batch norm trains it in train mode too (its statistics move), so pass ``dropout=False``
    for such a model to keep every layer in eval mode.

    Args:
        sut: the classifier SUT to repair (its ``model`` and ``preprocess``).
        extra_images, extra_labels: ``(M, C, H, W)`` in [0, 1] and ``(M,)``: the failures with their origins'
            classes (or the control's real images).
        real_images, real_labels: real training images ``(R, C, H, W)`` and labels, the rest of every batch.
        val_images, val_labels: real held-out images the stop rule reads.
        batch_size: images a step; ``extra_per_batch`` of them drawn from the extra images.
        lr: AdamW's learning rate (weight decay 1e-4, constant).
        max_shift: a random shift of up to this many pixels on every training image.
        seed: the draws of the batches and shifts.
        dropout: train mode (dropout on) while training; ``False``: eval mode throughout.
    """

    def __init__(self, sut: SUT, extra_images: torch.Tensor, extra_labels: torch.Tensor,
                 real_images: torch.Tensor, real_labels: torch.Tensor, val_images: torch.Tensor,
                 val_labels: torch.Tensor, num_classes: int, batch_size: int = 64, extra_per_batch: int = 16,
                 lr: float = 1e-4, max_shift: int = 2, seed: int = 0, dropout: bool = True) -> None:
        super().__init__()
        if not 0 < extra_per_batch < batch_size:
            raise ValueError(f"extra_per_batch must be in 1..{batch_size - 1}, got {extra_per_batch}")
        self.sut = sut
        self.sut.model.requires_grad_(True)
        self.extra = (extra_images, extra_labels.long())
        self.real = (real_images, real_labels.long())
        self.val = (val_images, val_labels.long())
        self.batch_size, self.extra_per_batch, self.lr, self.max_shift = batch_size, extra_per_batch, lr, max_shift
        self.dropout = dropout
        self.draws = torch.Generator().manual_seed(seed)
        self.val_accuracy = MulticlassAccuracy(num_classes, average="micro")

    def train_dataloader(self) -> DataLoader:
        """One item a step: the step's index (its batch is drawn in :meth:`training_step`)."""
        steps = self.trainer.max_steps if self.trainer.max_steps > 0 else 1
        return DataLoader(range(steps), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(*self.val), batch_size=500)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``extra_per_batch`` extra images and the rest real ones ``(B, C, H, W)``, shifted, and their labels."""
        extra = torch.randint(len(self.extra[1]), (self.extra_per_batch,), generator=self.draws)
        real = torch.randint(len(self.real[1]), (self.batch_size - self.extra_per_batch,), generator=self.draws)
        images = torch.cat([self.extra[0][extra], self.real[0][real]]).float()
        labels = torch.cat([self.extra[1][extra], self.real[1][real]])
        return random_shift(images, self.max_shift, self.draws), labels

    def training_step(self, step: int, batch_idx: int) -> torch.Tensor:
        self.sut.model.train(self.dropout)
        images, labels = self.batch()
        loss = F.cross_entropy(self.sut(images.to(self.device)), labels.to(self.device))
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.sut.model.eval()
        images, labels = batch
        self.val_accuracy.update(self.sut(images).argmax(-1), labels)

    def on_validation_epoch_end(self) -> None:
        self.log("val_accuracy", self.val_accuracy.compute())
        self.val_accuracy.reset()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.sut.model.parameters(), lr=self.lr, weight_decay=1e-4)


class ForgettingStop(L.Callback):
    """Stops the fine-tuning once the held-out accuracy has stayed more than ``tolerance`` below the model's own
    before fine-tuning for ``patience`` checks in a row, and puts back the weights of the last check within it (the
    first check runs before any step)."""

    def __init__(self, tolerance: float = 0.001, patience: int = 2) -> None:
        self.tolerance, self.patience = tolerance, patience
        self.before: float | None = None
        self.kept: dict[str, torch.Tensor] | None = None
        self.kept_step = 0
        self.below = 0
        self.history: list[tuple[int, float]] = []

    def on_validation_end(self, trainer: L.Trainer, module: RepairModule) -> None:
        accuracy = float(trainer.callback_metrics["val_accuracy"])
        self.history.append((trainer.global_step, accuracy))
        if self.before is None:
            self.before = accuracy
        if accuracy >= self.before - self.tolerance:
            self.kept, self.kept_step, self.below = copy.deepcopy(module.sut.model.state_dict()), trainer.global_step, 0
            return
        self.below += 1
        trainer.should_stop = self.below >= self.patience

    def on_fit_end(self, trainer: L.Trainer, module: RepairModule) -> None:
        if self.kept is not None:
            module.sut.model.load_state_dict(self.kept)


__all__ = ["ForgettingStop", "RepairModule"]
