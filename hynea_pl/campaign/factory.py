"""Per-case modules that share one process's frozen components.

A campaign builds the frozen components once per process: the ``generator``, the ``sut``, the ``oracle``, the
``realism`` test and any component nested in the method's arguments (e.g. HyNeA's ``steering.model``), all by the
config's parser (:meth:`hynea_pl.campaign.config.FitConfig.instantiate`). Each test case then gets only what is its
own: a fresh module (HyperNet and projector, or population) built around those shared objects, and a fresh
Trainer with fresh callbacks and logger.

Shared components must be frozen (no state that a case changes); the campaign test
``test_cases_share_no_state`` checks this by comparing a multi-case run with each case run alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT


@dataclass
class Components:
    """The frozen components of a campaign process: built once, shared by every case."""

    generator: Generator
    sut: SUT
    oracle: SUT | None = None
    realism: TypicalityTest | None = None

    def to(self, device: torch.device) -> Components:
        for module in (self.generator, self.sut, self.oracle, self.realism):
            if module is not None:
                module.to(device)
        return self


class CaseFactory:
    """Builds a case's module around the shared components: ``make(generator, sut, origin_class, seed,
    **overrides)``, where ``make`` is what the config's ``model`` section instantiates to (the method's class with
    its own arguments, nested components built once: :data:`hynea_pl.campaign.config.CaseModuleFactory`)."""

    def __init__(self, model_class: type[TestCaseModule], make: partial, components: Components) -> None:
        self.model_class = model_class
        self.make = make
        self.components = components

    @property
    def shared_args(self) -> dict[str, Any]:
        """The method's own arguments, shared by every case (nested components instantiated)."""
        return dict(self.make.keywords)

    def build(self, origin_class: int | None, seed: int, **overrides: Any) -> TestCaseModule:
        """A fresh module for one case, around the shared components (``overrides``: init arguments of another run
        of the case)."""
        return self.make(self.components.generator, self.components.sut, origin_class, seed, **overrides)

    def nested(self, name: str) -> Any:
        """A shared nested component of the method, or ``None``: an argument (a baseline's ``reference``) or, dotted,
        a field of an option group (HyNeA's ``steering.model``)."""
        head, *fields = name.split(".")
        value = self.make.keywords.get(head)
        for field in fields:
            value = getattr(value, field, None)
        return value


__all__ = ["CaseFactory", "Components"]
