"""Stop a test case at the very step the method finds what it searches for (a flip, or the target)."""

from __future__ import annotations

from typing import Any

import lightning as L

from hynea_pl.callbacks.stop import note_stop


class FlipEarlyStopping(L.Callback):
    """Sets ``trainer.should_stop`` at the end of the first step whose output reports ``found``.

    The criteria belong to the SUT's task (``SUT.is_flipped``, ``SUT.reaches_target``); each method says which one
    it searches for and returns the verdict as ``outputs["found"]``. The image of that step is the one the method
    keeps; ``pl_module.stop_reason`` becomes ``"flipped"``.
    """

    def __init__(self) -> None:
        self.flipped_at: int | None = None

    @staticmethod
    def should_stop(module: L.LightningModule, found: Any) -> bool:
        """The rule, for a Trainer's case (below) and a batched case's slot (:mod:`hynea_pl.methods.batched`): a
        case ends after the step that reports ``found``, noting ``flipped``."""
        if found:
            note_stop(module, "flipped")
        return bool(found)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        found = isinstance(outputs, dict) and outputs.get("found")
        if self.flipped_at is None and self.should_stop(pl_module, found):
            self.flipped_at = trainer.global_step
            trainer.should_stop = True
