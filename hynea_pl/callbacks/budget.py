"""Stop a test case when its SUT-evaluation budget is spent."""

from __future__ import annotations

from typing import Any

import lightning as L

from hynea_pl.callbacks.stop import fit_stop_reason, note_stop


class SUTEvaluationBudget(L.Callback):
    """Counts SUT evaluations (the method's ``sut_evals`` counter) and stops the Trainer at ``max_evals``.

    Methods declare ``evals_per_step``, at most what their next step spends (1 for HyNeA; for a genetic search the
    individuals it has not scored yet: the whole first population, then the children). The Trainer is stopped
    after the last step the budget can pay for in full, so a run never exceeds ``max_evals``.

    It also notes why the case ended (``pl_module.stop_reason``, :data:`hynea_pl.callbacks.stop.STOP_REASONS`):
    ``budget`` when it stops the Trainer; at the end of a fit nothing else explains, ``max_steps`` or
    ``converged`` (the method stopped itself).
    """

    def __init__(self, max_evals: int = 2700) -> None:
        if max_evals < 1:
            raise ValueError(f"max_evals must be >= 1, got {max_evals}")
        self.max_evals = max_evals

    @staticmethod
    def should_stop(module: L.LightningModule, max_evals: int, spent: int | None = None) -> bool:
        """The rule, for a Trainer's case (below) and a batched case's slot (:mod:`hynea_pl.methods.batched`): a
        case ends when its next step could overrun ``max_evals``, the SUT evaluations it spent (``spent``, default
        the module's ``sut_evals``; a batch passes its case's over all its runs) plus at most what its next step
        spends (``evals_per_step``), noting ``budget``."""
        spent = int(module.sut_evals if spent is None else spent) + int(module.evals_per_step) > max_evals
        if spent:
            note_stop(module, "budget")
        return spent

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        per_step = int(pl_module.evals_per_step)
        if per_step > self.max_evals:
            raise ValueError(f"budget of {self.max_evals} SUT evaluations cannot pay for one step "
                             f"({per_step} evaluations)")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.should_stop(pl_module, self.max_evals):
            trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        note_stop(pl_module, fit_stop_reason(trainer))
