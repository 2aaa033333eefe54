"""AdamW and the OneCycle schedule per slot of stacked parameters ``(slots, *shape)``.

AdamW is elementwise, so B cases' optimisers are one AdamW over the stacked weights as long as each slot keeps its
own learning rate, step count and moments, and a slot can be reset when a new case takes it. ``torch.optim.AdamW``
has one learning rate and one step count per parameter, hence this one. It follows torch's single-tensor AdamW
(amsgrad off); :func:`one_cycle_lr` is ``torch.optim.lr_scheduler.OneCycleLR``'s cosine schedule (two phases).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor


def one_cycle_lr(step: int, total_steps: int, max_lr: float, initial_lr: float, pct_start: float,
                 final_div_factor: float = 1e4) -> float:
    """The learning rate of OneCycleLR (cosine annealing, two phases) after ``step`` scheduler steps (0: the first
    optimiser step's), for a cycle of ``total_steps`` from ``initial_lr`` up to ``max_lr`` and down to
    ``initial_lr / final_div_factor``."""
    if step > total_steps:
        raise ValueError(f"step {step} is past the cycle's {total_steps} steps")
    phases = ((float(pct_start * total_steps) - 1, initial_lr, max_lr),
              (float(total_steps - 1), max_lr, initial_lr / final_div_factor))
    start_step = 0.0
    for index, (end_step, start, end) in enumerate(phases):
        if step <= end_step or index == len(phases) - 1:
            pct = (step - start_step) / (end_step - start_step)
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        start_step = end_step
    raise AssertionError("unreachable")


class SlotAdamW(torch.optim.Optimizer):
    """AdamW over parameters stacked ``(slots, *shape)``, each slot with its own learning rate, step count and
    moments.

    :meth:`step` updates only the slots in ``rows`` (the others keep weights and moments) with learning rates
    ``lrs`` (one per row); :meth:`reset` gives a slot fresh moments and a step count of 0.
    """

    def __init__(self, params: Iterable[Tensor], slots: int, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(list(params), {"betas": betas, "eps": eps, "weight_decay": weight_decay, "lr": 0.0})
        self.slots = slots
        self.steps = [0] * slots
        self.rows: Tensor | None = None  # slots stepped by the next step()
        self.lrs: list[float] = []  # their learning rates
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    @torch.no_grad()
    def reset(self, slot: int) -> None:
        """Fresh moments and step count for ``slot`` (a new case took it)."""
        self.steps[slot] = 0
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["exp_avg"][slot].zero_()
                self.state[p]["exp_avg_sq"][slot].zero_()

    def schedule(self, rows: list[int], lrs: list[float]) -> None:
        """Which slots the next :meth:`step` updates, and their learning rates."""
        self.rows, self.lrs = torch.tensor(rows, dtype=torch.long), list(lrs)

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 (torch's signature)
        """One AdamW step of the slots set by :meth:`schedule`."""
        loss = closure() if closure is not None else None
        if self.rows is None or not len(self.rows):
            return loss
        rows = self.rows.tolist()
        for slot in rows:
            self.steps[slot] += 1
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            wd, eps = group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                index = self.rows.to(p.device)
                shape = (len(rows),) + (1,) * (p.dim() - 1)

                def per_row(values: list[float], like: Tensor = p) -> Tensor:
                    return torch.tensor(values, dtype=like.dtype, device=like.device).reshape(shape)

                grad = p.grad.index_select(0, index)
                param = p.index_select(0, index)
                exp_avg = self.state[p]["exp_avg"].index_select(0, index)
                exp_avg_sq = self.state[p]["exp_avg_sq"].index_select(0, index)
                param.mul_(per_row([1 - lr * wd for lr in self.lrs]))
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = per_row([lr / (1 - beta1 ** self.steps[s]) for s, lr in zip(rows, self.lrs, strict=True)])
                root = per_row([math.sqrt(1 - beta2 ** self.steps[s]) for s in rows])
                param.sub_(step_size * exp_avg / (exp_avg_sq.sqrt() / root).add_(eps))
                p.index_copy_(0, index, param)
                self.state[p]["exp_avg"].index_copy_(0, index, exp_avg)
                self.state[p]["exp_avg_sq"].index_copy_(0, index, exp_avg_sq)
        return loss


__all__ = ["SlotAdamW", "one_cycle_lr"]
