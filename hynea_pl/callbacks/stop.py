"""Why a test case ended: the callbacks note it on the module (``stop_reason``) for the case's record."""

from __future__ import annotations

import lightning as L

#: Why a case stopped, most decisive first: ``flipped`` (it found what it searches for), ``budget`` (the next step
#: would overrun the SUT-evaluation budget), ``converged`` (the method's own stop rule, e.g. SINVAD's decayed
#: mutation scale or the end of a probe schedule), ``max_steps`` (the Trainer's step limit), ``case_done`` (another
#: run of the same case, beside it in a batch, found the case's result or failed: :mod:`hynea_pl.campaign.runner`).
STOP_REASONS: tuple[str, ...] = ("flipped", "budget", "converged", "max_steps", "case_done")
#: The reasons that end a case before it found anything and before its budget was spent.
EARLY_STOP_REASONS = frozenset({"converged", "max_steps"})


def note_stop(module: L.LightningModule, reason: str) -> None:
    """Set ``module.stop_reason`` to ``reason`` unless a more decisive reason (:data:`STOP_REASONS`) is noted."""
    current = getattr(module, "stop_reason", None)
    if current is None or STOP_REASONS.index(reason) < STOP_REASONS.index(current):
        module.stop_reason = reason


def at_step_limit(steps: int, max_steps: int) -> bool:
    """Whether a case that ran ``steps`` steps reached the Trainer's step limit (``max_steps`` <= 0: none)."""
    return 0 < max_steps <= steps


def fit_stop_reason(trainer: L.Trainer) -> str:
    """Why a fit that no callback stopped ended: the Trainer's ``max_steps``, else the method's own rule."""
    return "max_steps" if at_step_limit(trainer.global_step, trainer.max_steps) else "converged"
