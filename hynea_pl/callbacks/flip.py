"""Stop a test case at the very step its SUT prediction flips."""

from __future__ import annotations

from typing import Any

import lightning as L


class FlipEarlyStopping(L.Callback):
    """Sets ``trainer.should_stop`` at the end of the first step whose output reports ``flipped``.

    The flip criterion belongs to the SUT's task (``SUT.is_flipped``): the training step returns its verdict as
    ``outputs["flipped"]``. The flipped image is the one produced in that step (kept by the method).
    """

    def __init__(self) -> None:
        self.flipped_at: int | None = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if isinstance(outputs, dict) and outputs.get("flipped") and self.flipped_at is None:
            self.flipped_at = trainer.global_step
            trainer.should_stop = True
