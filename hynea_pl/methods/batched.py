"""Batched HyNeA: B test cases adapt together in one LightningModule and one Trainer (``--cases.batch_size B``).

Each slot holds one :class:`~hynea_pl.methods.hynea.HyNeACase`, set up as for a single run (its origin, target,
control, fresh HyperNet and projector). One training step runs the sampling chain and the decoder once for every
occupied slot (the frozen generator on ``b`` rows, each slot's HyperNet and projector through
:class:`~hynea_pl.methods.batched_adapters.StackedAdapters`), the SUT once on the ``b`` images and their search views
(:meth:`HyNeACase.sut_inputs`) and the reference once on all their reference views; then each slot's own
:meth:`HyNeACase.case_step` (the single owner of the loss, the found
rule and the kept result) runs on its rows, and torch's ``AdamW`` steps each slot as its own param group, with its
own ``OneCycleLR`` learning rate. A case that ends leaves its slot at once (``case_done``: the campaign writes its
record, or builds its next run when it has runs left) and the next run (``next_case``: a case's retry, or the next
planned case) takes the slot with fresh weights and optimiser state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import lightning as L
import torch
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, IterableDataset

from hynea_pl.callbacks.budget import SUTEvaluationBudget
from hynea_pl.callbacks.flip import FlipEarlyStopping
from hynea_pl.callbacks.stop import at_step_limit, note_stop
from hynea_pl.methods.base import batches
from hynea_pl.methods.batched_adapters import StackedAdapters
from hynea_pl.methods.hynea import HyNeACase
from hynea_pl.suts import SUT

#: Builds and sets up the next run to take a slot (a case's next run, or the next planned case); ``None`` when none
#: is waiting.
NextCase = Callable[[], HyNeACase | None]
#: Told that a case left its slot: the case, its steps and the error that ended it (``None``: it ended normally).
CaseDone = Callable[[HyNeACase, int, Exception | None], None]
#: The SUT evaluations the budget counts for a run: those of its case, over all its runs (several may share a batch).
Spent = Callable[[HyNeACase], int]


class _Steps(IterableDataset):
    """An endless stream of step indices: the batch ends when its last case does, not with the data."""

    def __iter__(self) -> Iterator[int]:
        return iter(itertools.count())


@batches(HyNeACase)
class BatchedHyNeA(L.LightningModule):
    """Up to ``slots`` HyNeA cases adapting together; see the module docstring.

    Args:
        first: the first case, set up (its HyperNet and projector are the templates every slot runs through).
        next_case: the next run to take a slot, set up, or ``None`` when none is waiting.
        case_done: called once per run when it leaves its slot.
        slots: B.
        max_steps: each case's step limit (the config's ``trainer.max_steps``; also its OneCycle length unless
            the case sets ``total_steps``).
        max_evals: each case's SUT-evaluation budget (``budget.max_evals``).
        spent: what the budget counts for a run: its case's SUT evaluations over all its runs (the campaign's case
            loop may run several runs of a case side by side); default: the run's own counter (``sut_evals``).

    Why the per-case stop lives here and not in the campaign's callbacks: a callback stops a Trainer, and this
    Trainer runs every case of the batch. A case must leave its slot (and a new one take it) between two steps of
    the others, so this module applies to each slot, after its step, the callbacks' own rules
    (``FlipEarlyStopping.should_stop``: found; ``SUTEvaluationBudget.should_stop``: the next step would overrun the
    budget; :func:`~hynea_pl.callbacks.stop.at_step_limit`: the Trainer's ``max_steps``), which note the same
    ``stop_reason``. A run whose ``stop_reason`` something else noted during a step (``case_done``: another run of
    its case found the result) leaves its slot after that step too.
    """

    def __init__(self, first: HyNeACase, next_case: NextCase, case_done: CaseDone, slots: int, max_steps: int,
                 max_evals: int, spent: Spent | None = None) -> None:
        super().__init__()
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if max_steps is None or max_steps <= 0:
            raise ValueError("batched HyNeA needs trainer.max_steps (each case's step limit and OneCycle length)")
        self.automatic_optimization = False
        self.slots, self.max_steps, self.max_evals = slots, int(max_steps), int(max_evals)
        self._next_case, self._case_done = next_case, case_done
        self._spent: Spent = spent if spent is not None else (lambda case: int(case.sut_evals))
        self.stack = StackedAdapters(first.hypernet, first.projector, slots)
        self.cases: list[HyNeACase | None] = [None] * slots
        self.case_steps = [0] * slots
        self.schedules: list[OneCycleLR | None] = [None] * slots
        self._pending: HyNeACase | None = first

    # ------------------------------------------------------------------ slots
    @property
    def active(self) -> list[int]:
        """The occupied slots."""
        return [slot for slot, case in enumerate(self.cases) if case is not None]

    def _take(self, slot: int, case: HyNeACase) -> None:
        self.stack.load(slot, {"hypernet": case.hypernet, "projector": case.projector})
        if case.hparams.save_adapters:  # the kept weights are the slot's, read from the stack
            case.adapter_weights = lambda slot=slot: self.stack.slot_weights(slot)
        else:  # the slot's weights live in the stack now: free the case's own copy (a denoiser's encoder half)
            case.hypernet = case.projector = None
        self.cases[slot], self.case_steps[slot], self.schedules[slot] = case, 0, self._schedule(case)
        if self._trainer is not None and self.trainer.optimizers:  # fresh moments and step count
            optimizer = self.trainer.optimizers[0]
            for view in optimizer.param_groups[slot]["params"]:
                optimizer.state.pop(view, None)

    def _schedule(self, case: HyNeACase) -> OneCycleLR:
        """The case's own OneCycle schedule (:meth:`HyNeACase.one_cycle`) on a stand-in optimiser that holds only
        the slot's learning rate (a torch scheduler sets every param group of its optimiser, and the slot is one
        group of the batch's)."""
        holder = torch.optim.SGD([torch.zeros(0, requires_grad=True)], lr=case.learning_rates[0])
        return case.one_cycle(holder, self.max_steps)

    def _fill(self) -> None:
        """Give every free slot the next run waiting (a retry first, then the next planned case)."""
        for slot in range(self.slots):
            if self.cases[slot] is not None:
                continue
            case, self._pending = self._pending, None
            if case is None:
                case = self._next_case()
            if case is None:
                return
            self._take(slot, case)

    def _leave(self, slot: int, error: Exception | None) -> None:
        case, steps = self.cases[slot], self.case_steps[slot]
        self.cases[slot] = None
        self._case_done(case, steps, error)

    def fail_active(self, error: Exception) -> None:
        """End every case still in a slot, or waiting for one, with ``error`` (the batch's shared step failed)."""
        for slot in self.active:
            self._leave(slot, error)
        pending, self._pending = self._pending, None
        if pending is not None:
            self._case_done(pending, 0, error)

    def setup(self, stage: str) -> None:
        self._fill()

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_Steps(), batch_size=None)

    def configure_optimizers(self) -> torch.optim.AdamW:
        """torch's AdamW, one param group per slot (the slot's views of the stacked weights): each slot has its own
        learning rate, weight decay, step count and moments, and a slot without gradients is skipped. Measured against
        the hand-written AdamW over the stacked weights it replaced (MNIST zoo HyperNet + projector, CPU, one thread,
        the optimiser step alone): 25 against 16 steps/s at B = 8, 12.6 against 13.0 at B = 16."""
        stacked = self.stack.trainable()
        return torch.optim.AdamW([{"params": [p.detach()[slot] for p in stacked]} for slot in range(self.slots)])

    # ------------------------------------------------------------------ one step of every slot
    def _condition(self, cases: list[HyNeACase]) -> Any:
        classes = [case.condition for case in cases]
        if all(c == classes[0] for c in classes):
            return classes[0]
        return torch.tensor(classes, dtype=torch.long, device=self.device)

    def training_step(self, batch: int, batch_idx: int) -> None:
        self._fill()
        rows = self.active
        if not rows:
            self.trainer.should_stop = True
            return
        cases = [self.cases[slot] for slot in rows]
        generator, sut = cases[0].generator, cases[0].sut
        index = None if len(rows) == self.slots else torch.tensor(rows, device=self.device)
        controls = self.stack.project(torch.cat([case.control for case in cases]), index)
        condition = self._condition(cases)
        latents = generator.denoise(torch.cat([case.noise for case in cases]), condition,
                                    hypernet=self.stack.hypernet(index), control=controls)
        images = HyNeACase.as_read(generator.decode(latents, condition))
        outputs = self._read_sut(sut, rows, cases, images)
        references = self._read_references(cases, images)
        losses, stepped, found, errors = [], [], {}, {}
        for j, (slot, case) in enumerate(zip(rows, cases, strict=True)):
            try:
                loss, found[slot], _ = case.case_step(self.case_steps[slot] + 1, latents[j:j + 1],
                                                      images[j:j + 1], outputs[j], references[j])
            except Exception as error:  # this case's record takes the error; the others go on
                errors[slot] = error
                continue
            losses.append(loss)
            stepped.append(slot)
        optimizer = self.optimizers()
        optimizer.zero_grad()  # the slots' views of the stacked gradients,
        self.stack.zero_grad()  # and those
        if losses:
            total = torch.stack(losses).sum()  # each slot's weights only see their own case's loss
            self.manual_backward(total)
            self._hand_over(optimizer.optimizer, set(stepped))
            optimizer.step()
            self.log_dict({"loss": total / len(losses), "active": float(len(rows))}, prog_bar=True, on_step=True,
                          on_epoch=False, batch_size=len(rows))
        for slot in stepped:
            self.case_steps[slot] += 1
            try:  # the schedule steps after the optimiser, as Lightning steps a case's; its error is the case's
                self.schedules[slot].optimizer.step()
                self.schedules[slot].step()
            except Exception as error:
                errors[slot] = error
        for slot, error in errors.items():
            self._leave(slot, error)
        for slot in stepped:
            if slot not in errors and self._stops(self.cases[slot], found[slot], self.case_steps[slot]):
                self._leave(slot, None)
        for slot in self.active:  # runs their case ended while this step's others left
            if self.cases[slot].stop_reason is not None:
                self._leave(slot, None)
        self._fill()
        if not self.active:
            self.trainer.should_stop = True

    def _hand_over(self, optimizer: torch.optim.Optimizer, stepped: set[int]) -> None:
        """Give each stepped slot's param group its case's learning rate and weight decay and its rows of the stacked
        gradients; the other slots' groups none (AdamW skips a parameter without a gradient)."""
        stacked = self.stack.trainable()
        for slot, group in enumerate(optimizer.param_groups):
            for view, param in zip(group["params"], stacked, strict=True):
                view.grad = param.grad[slot] if slot in stepped and param.grad is not None else None
            if slot in stepped:
                group["lr"] = self.schedules[slot].get_last_lr()[0]
                group["weight_decay"] = self.cases[slot].search.weight_decay

    def _read_sut(self, sut: SUT, rows: list[int], cases: list[HyNeACase], images: torch.Tensor) -> list[torch.Tensor]:
        """The SUT's outputs on every case's image and views (:meth:`HyNeACase.sut_inputs` at the case's next
        step), in one call, split per case."""
        inputs = [case.sut_inputs(images[j:j + 1], self.case_steps[slot] + 1)
                  for j, (slot, case) in enumerate(zip(rows, cases, strict=True))]
        return list(sut(torch.cat(inputs)).split([len(x) for x in inputs]))

    def _read_references(self, cases: list[HyNeACase], images: torch.Tensor) -> list[torch.Tensor | None]:
        """The reference's outputs on every case's views, in one call, split per case."""
        reference = cases[0].reference
        if reference is None:
            return [None] * len(cases)
        views = [case.reference_inputs(images[j:j + 1]) for j, case in enumerate(cases)]
        return list(reference(torch.cat(views)).split([len(v) for v in views]))

    def _stops(self, case: HyNeACase, found: bool, steps: int) -> bool:
        """Whether ``case`` ends after its step ``steps``, noting why (the callbacks' rules, see the class)."""
        FlipEarlyStopping.should_stop(case, found)
        SUTEvaluationBudget.should_stop(case, self.max_evals, self._spent(case))
        if at_step_limit(steps, self.max_steps):
            note_stop(case, "max_steps")
        return case.stop_reason is not None


__all__ = ["BatchedHyNeA", "CaseDone", "NextCase", "Spent"]
