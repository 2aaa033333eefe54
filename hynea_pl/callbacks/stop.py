"""Why a test case ended: the callbacks note it on the module (``stop_reason``) for the case's record."""

from __future__ import annotations

import lightning as L

#: Why a case stopped, most decisive first: ``flipped`` (it found what it searches for), ``budget`` (the next step
#: would overrun the SUT-evaluation budget), ``converged`` (the method's own stop rule, e.g. SINVAD's decayed
#: mutation scale or the end of a probe schedule), ``max_steps`` (the Trainer's step limit).
STOP_REASONS: tuple[str, ...] = ("flipped", "budget", "converged", "max_steps")
#: The reasons that end a case before it found anything and before its budget was spent.
EARLY_STOP_REASONS = frozenset({"converged", "max_steps"})


def note_stop(module: L.LightningModule, reason: str) -> None:
    """Set ``module.stop_reason`` to ``reason`` unless a more decisive reason (:data:`STOP_REASONS`) is noted."""
    current = getattr(module, "stop_reason", None)
    if current is None or STOP_REASONS.index(reason) < STOP_REASONS.index(current):
        module.stop_reason = reason


def fit_stop_reason(trainer: L.Trainer) -> str:
    """Why a fit that no callback stopped ended: the Trainer's ``max_steps``, else the method's own rule."""
    return "max_steps" if 0 < trainer.max_steps <= trainer.global_step else "converged"
