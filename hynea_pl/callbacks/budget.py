"""Stop a test case when its SUT-evaluation budget is spent."""

from __future__ import annotations

from typing import Any

import lightning as L

from hynea_pl.callbacks.stop import fit_stop_reason, note_stop


def budget_spent(module: L.LightningModule, max_evals: int) -> bool:
    """Whether ``module``'s next step could overrun ``max_evals``: the SUT evaluations it spent (``sut_evals``) plus
    at most what its next step spends (``evals_per_step``). The one budget rule, for a Trainer (the callback below)
    and for a batched case's slot (:mod:`hynea_pl.methods.batched`)."""
    return int(module.sut_evals) + int(module.evals_per_step) > max_evals


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
    def _per_step(pl_module: L.LightningModule) -> int:
        return int(pl_module.evals_per_step)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._per_step(pl_module) > self.max_evals:
            raise ValueError(f"budget of {self.max_evals} SUT evaluations cannot pay for one step "
                             f"({self._per_step(pl_module)} evaluations)")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if budget_spent(pl_module, self.max_evals):
            trainer.should_stop = True
            note_stop(pl_module, "budget")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        note_stop(pl_module, fit_stop_reason(trainer))
