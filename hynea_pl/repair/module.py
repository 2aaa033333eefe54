"""The SUT's fine-tuning on its failures as a ``LightningModule``: every batch mixes failures (or, for the control,
as many real images drawn at random) with real training images, so that the model does not forget; a callback then
moves the weights back towards the original's until the held-out accuracy is kept (:class:`WeightInterpolation`)."""

from __future__ import annotations

import copy

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from hynea_pl.repair.measure import accuracy, predictions
from hynea_pl.suts import SUT
from hynea_pl.zoo.augment import random_shift


class RepairModule(L.LightningModule):
    """Fine-tunes ``sut.model``: its dropout on while it trains (``dropout``), as the SUT was trained, off when it is
    measured; a model with batch norm trains it in train mode too (its statistics move), so pass ``dropout=False``
    for such a model to keep every layer in eval mode.

    Args:
        sut: the classifier SUT to repair (its ``model`` and ``preprocess``).
        extra_images, extra_labels: ``(M, C, H, W)`` in [0, 1] and ``(M,)``: the failures with their origins'
            classes (or the control's real images).
        real_images, real_labels: real training images ``(R, C, H, W)`` and labels, the rest of every batch.
        val_images, val_labels: real held-out images ``(V, C, H, W)`` and labels (:meth:`held_out_accuracy`).
        batch_size: images a step; ``extra_per_batch`` of them drawn from the extra images.
        lr: AdamW's peak learning rate (weight decay 1e-4), annealed to 0 over the run (cosine).
        max_shift: a random shift of up to this many pixels on every training image.
        seed: the draws of the batches and shifts.
        dropout: train mode (dropout on) while training; ``False``: eval mode throughout.
    """

    def __init__(self, sut: SUT, extra_images: torch.Tensor, extra_labels: torch.Tensor,
                 real_images: torch.Tensor, real_labels: torch.Tensor, val_images: torch.Tensor,
                 val_labels: torch.Tensor, batch_size: int = 256, extra_per_batch: int = 32, lr: float = 3e-5,
                 max_shift: int = 2, seed: int = 0, dropout: bool = True) -> None:
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

    def train_dataloader(self) -> DataLoader:
        """One item a step: the step's index (its batch is drawn in :meth:`training_step`)."""
        return DataLoader(range(self.total_steps()), batch_size=None)

    def total_steps(self) -> int:
        return self.trainer.max_steps if self.trainer.max_steps > 0 else 1

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

    def held_out_accuracy(self) -> float:
        """The fraction of the held-out images the model (in eval mode) reads right."""
        self.sut.model.eval()
        images, labels = self.val
        return accuracy(predictions(self.sut, images.to(self.device)).cpu(), labels)

    def configure_optimizers(self) -> dict:
        optimizer = torch.optim.AdamW(self.sut.model.parameters(), lr=self.lr, weight_decay=1e-4)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, self.total_steps())
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class WeightInterpolation(L.Callback):
    """After the fine-tuning, keeps the weights ``original + alpha * (fine-tuned - original)`` of the largest
    ``alpha`` in ``alphas`` whose held-out accuracy is at most ``tolerance`` below the original's (``alpha = 0``, the
    original, when none is): the fine-tuning may forget, the kept model may not (weight-space ensembling,
    Wortsman et al., "Robust fine-tuning of zero-shot models", CVPR 2022)."""

    def __init__(self, tolerance: float = 0.0005,
                 alphas: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)) -> None:
        self.tolerance, self.alphas = tolerance, tuple(sorted(alphas, reverse=True))
        self.original: dict[str, torch.Tensor] | None = None
        self.before: float | None = None
        self.alpha = 0.0
        self.history: list[tuple[float, float]] = []

    def on_fit_start(self, trainer: L.Trainer, module: RepairModule) -> None:
        self.original = copy.deepcopy(module.sut.model.state_dict())
        self.before = module.held_out_accuracy()
        self.history = [(0.0, self.before)]

    def on_fit_end(self, trainer: L.Trainer, module: RepairModule) -> None:
        tuned = copy.deepcopy(module.sut.model.state_dict())
        for alpha in self.alphas:
            module.sut.model.load_state_dict(self.mix(tuned, alpha))
            accuracy = module.held_out_accuracy()
            self.history.append((alpha, accuracy))
            if accuracy >= self.before - self.tolerance:
                self.alpha = alpha
                return
        self.alpha = 0.0
        module.sut.model.load_state_dict(self.original)

    def mix(self, tuned: dict[str, torch.Tensor], alpha: float) -> dict[str, torch.Tensor]:
        """``original + alpha * (tuned - original)``, entry by entry (integer buffers kept from ``tuned``)."""
        return {key: self.original[key] + alpha * (value - self.original[key]) if value.is_floating_point() else value
                for key, value in tuned.items()}


__all__ = ["RepairModule", "WeightInterpolation"]
