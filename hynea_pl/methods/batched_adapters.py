"""The trainable weights of B HyNeA cases stacked on a leading slot dimension, run together with ``torch.func.vmap``.

Each slot holds one case's HyperNet and control projector; one call runs every (or a chosen set of) slot(s) over
its own rows of the model batch. ``vmap`` over ``functional_call`` turns the per-slot convolutions into grouped ones
and the linear layers into batched matmuls, which measured faster than a loop over B separate HyperNets on the MNIST
zoo's chain (CPU, one thread, B = 16: 0.44-0.47 s per image against 0.65-0.70).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

# torch runs SDPA per slot under vmap (no batching rule for the CPU flash kernel) and says so at every step; it stays
# the memory-lean kernel, the warning is noise
warnings.filterwarnings("ignore", message=r"There is a performance drop because we have not yet implemented")

#: Which modules of a case a slot holds, in this order.
ADAPTERS = ("hypernet", "projector")


def _key(module: str, name: str) -> str:
    return f"{module}__{name.replace('.', '__')}"


class StackedAdapters(nn.Module):
    """``slots`` cases' HyperNet and projector weights, each parameter stacked ``(slots, *shape)``.

    Args:
        hypernet: one case's HyperNet; it becomes the template every slot's weights are run through (its own
            weights are never read again).
        projector: one case's :class:`~hynea_pl.hypernets.ControlProjector`, the same.
        slots: B, the number of slots.

    Buffers are shared (taken from the templates: a fresh HyperNet's buffers do not depend on its case).
    """

    def __init__(self, hypernet: nn.Module, projector: nn.Module, slots: int) -> None:
        super().__init__()
        self.slots = slots
        self._templates = {"hypernet": hypernet, "projector": projector}  # not submodules: not trained, not moved
        self.weights = nn.ParameterDict()
        self._names: dict[str, list[tuple[str, str]]] = {}
        for module_name, module in self._templates.items():
            names = []
            for name, param in module.named_parameters():
                stacked = param.detach().unsqueeze(0).repeat(slots, *([1] * param.dim())).clone()
                self.weights[_key(module_name, name)] = nn.Parameter(stacked, requires_grad=param.requires_grad)
                names.append((name, _key(module_name, name)))
            self._names[module_name] = names
        self._buffers_of = {name: dict(module.named_buffers()) for name, module in self._templates.items()}

    # ------------------------------------------------------------------ slots
    @torch.no_grad()
    def load(self, slot: int, modules: dict[str, nn.Module]) -> None:
        """Copy a fresh case's ``{"hypernet": ..., "projector": ...}`` weights into ``slot``."""
        for module_name, names in self._names.items():
            params = dict(modules[module_name].named_parameters())
            for name, key in names:
                self.weights[key][slot].copy_(params[name])

    @torch.no_grad()
    def slot_weights(self, slot: int) -> dict[str, dict[str, Tensor]]:
        """A copy of ``slot``'s weights as the two modules' state dicts: ``{"hypernet": {...}, "projector": {...}}``."""
        out: dict[str, dict[str, Tensor]] = {}
        for module_name, names in self._names.items():
            state = {name: self.weights[key][slot].detach().clone() for name, key in names}
            state.update({name: b.detach().clone() for name, b in self._buffers_of[module_name].items()})
            out[module_name] = state
        return out

    def trainable(self) -> list[nn.Parameter]:
        """The stacked parameters the optimiser steps."""
        return [p for p in self.weights.values() if p.requires_grad]

    def _params(self, module_name: str, rows: Tensor | None) -> dict[str, Tensor]:
        return {name: (self.weights[key] if rows is None else self.weights[key].index_select(0, rows))
                for name, key in self._names[module_name]}

    # ------------------------------------------------------------------ running the slots
    def project(self, signals: Tensor, rows: Tensor | None = None) -> Tensor:
        """Every chosen slot's projector on its own signal: ``signals (b, *signal_shape)`` -> ``(b, C, h, w)``;
        ``rows (b,)``: the slots (default: all)."""
        template, buffers = self._templates["projector"], self._buffers_of["projector"]

        def one(params: dict[str, Tensor], signal: Tensor) -> Tensor:
            return functional_call(template, (params, buffers), (signal.unsqueeze(0),)).squeeze(0)

        return vmap(one)(self._params("projector", rows), signals)

    def hypernet(self, rows: Tensor | None = None) -> Callable[..., Any]:
        """A HyperNet for :meth:`DiffusionGenerator.denoise` that runs every chosen slot's HyperNet on its rows."""
        return _SlotHyperNet(self._templates["hypernet"], self._params("hypernet", rows),
                             self._buffers_of["hypernet"])


class _SlotHyperNet:
    """Called by the chain like one HyperNet on a model batch of ``N = k b`` rows (``k = 2`` under guidance, stacked
    ``torch.cat([x, x])``: rows ``i`` and ``b + i`` belong to slot ``i``). Tensors among the arguments (nested ones
    too, e.g. a DiT's ``(timestep, labels)`` context) with ``N`` rows are split per slot into ``(b, k, ...)``, those
    with ``b`` rows (the controls) into ``(b, 1, ...)``; anything else (a scalar timestep) is shared. The residuals
    come back in the chain's row order."""

    def __init__(self, template: nn.Module, params: dict[str, Tensor], buffers: dict[str, Tensor]) -> None:
        self.template, self.params, self.buffers = template, params, buffers
        self.slots = next(iter(params.values())).shape[0]

    def __call__(self, *args: Any) -> Any:
        n, b = args[0].shape[0], self.slots
        if n % b:
            raise ValueError(f"model batch {n} is not a multiple of the {b} slots")
        k = n // b

        def split(x: Any) -> tuple[Any, int | None]:
            if isinstance(x, Tensor) and x.dim() > 0 and x.shape[0] == n:
                return x.reshape(k, b, *x.shape[1:]).movedim(0, 1), 0
            if isinstance(x, Tensor) and x.dim() > 0 and x.shape[0] == b:
                return x.unsqueeze(1), 0
            return x, None

        leaves, args_tree = tree_flatten(args)
        inputs, dims = zip(*(split(leaf) for leaf in leaves), strict=True) if leaves else ((), ())
        spec: list[Any] = []

        def one(params: dict[str, Tensor], *slot_leaves: Any) -> tuple[Tensor, ...]:
            slot_args = tree_unflatten(list(slot_leaves), args_tree)
            flat, tree = tree_flatten(functional_call(self.template, (params, self.buffers), tuple(slot_args)))
            spec[:] = [tree, [x is None for x in flat]]
            return tuple(x for x in flat if x is not None)

        outputs = vmap(one, in_dims=(0, *dims))(self.params, *inputs)
        merged = iter(x.movedim(1, 0).reshape(n, *x.shape[2:]) for x in outputs)
        tree, missing = spec
        return tree_unflatten([None if gone else next(merged) for gone in missing], tree)


__all__ = ["ADAPTERS", "StackedAdapters"]
