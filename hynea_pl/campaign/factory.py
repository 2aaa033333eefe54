"""Per-case modules that share one process's frozen components.

A campaign builds the frozen components once per process: the ``generator``, the ``sut``, the ``oracle`` and any
component nested in the method's arguments (e.g. HyNeA's ``reference``). Each test case then gets only what is its
own: a fresh module (HyperNet and projector, or population) built around those shared objects, and a fresh
Trainer with fresh callbacks and logger.

Shared components must be frozen (no state that a case changes); the campaign test
``test_cases_share_no_state`` checks this by comparing a multi-case run with each case run alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from jsonargparse import ArgumentParser, Namespace
from jsonargparse.typing import import_object
from lightning.pytorch import Trainer
from lightning.pytorch.cli import LightningArgumentParser

from hynea_pl.generators import ClassEmbedding, Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT

#: Model arguments the campaign fills per case (the others come from the config, built once).
CASE_ARGS = ("generator", "sut", "origin_class", "seed", "attempt")


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


def _plain(value: Any) -> Any:
    return value.as_dict() if isinstance(value, Namespace) else value


def build_components(config: Namespace) -> Components:
    """Instantiate the config's ``generator``, ``sut`` and optional ``oracle`` and ``realism`` test
    (``class_path`` + ``init_args``)."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(Generator, "generator", required=True)
    parser.add_subclass_arguments(SUT, "sut", required=True)
    parser.add_subclass_arguments(SUT, "oracle", required=False)
    parser.add_subclass_arguments(TypicalityTest, "realism", required=False)
    values = {"generator": _plain(config.generator), "sut": _plain(config.sut)}
    for optional in ("oracle", "realism"):
        if config.get(optional) is not None:
            values[optional] = _plain(config[optional])
    init = parser.instantiate_classes(parser.parse_object(values))
    return Components(init.generator, init.sut, init.get("oracle"), init.get("realism"))


class CaseFactory:
    """Builds a case's module: ``model_class(generator, sut, origin_class, seed, **shared_args)``, where
    ``shared_args`` are the config's ``model.init_args`` with their nested components instantiated once."""

    def __init__(self, config: Namespace, components: Components) -> None:
        self.model_class: type[TestCaseModule] = import_object(config.model.class_path)
        self.components = components
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(self.model_class, "model", skip=set(CASE_ARGS))
        init_args = {k: v for k, v in _plain(config.model.get("init_args") or Namespace()).items()
                     if k not in CASE_ARGS}
        built = parser.instantiate_classes(parser.parse_object({"model": init_args}), instantiate_groups=False)
        self.shared_args: dict[str, Any] = dict(vars(built.model))

    def build(self, origin_class: int | None, seed: int, **overrides: Any) -> TestCaseModule:
        """A fresh module for one case, around the shared components (``overrides``: init arguments of another run
        of the case)."""
        return self.model_class(generator=self.components.generator, sut=self.components.sut,
                                origin_class=origin_class, seed=seed, **{**self.shared_args, **overrides})

    def nested(self, name: str) -> Any:
        """A shared nested component of the method (e.g. ``reference``), or ``None``."""
        return self.shared_args.get(name)


@lru_cache(maxsize=1)
def _trainer_parser() -> LightningArgumentParser:
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_lightning_class_args(Trainer, "trainer")
    return parser


def build_trainer_args(trainer: Namespace) -> dict[str, Any]:
    """The config's ``trainer`` arguments with fresh callbacks and logger, instantiated now for one case."""
    parser = _trainer_parser()
    built = parser.instantiate_classes(parser.parse_object({"trainer": _plain(trainer)}), instantiate_groups=False)
    return dict(vars(built.trainer))


def class_count(module: torch.nn.Module | None) -> int | None:
    """How many classes a component knows: its own ``num_classes``, else that of its class embedding (a
    class-conditional generator: :class:`hynea_pl.generators.ClassEmbedding`, a DiT's label embedding), else, for a
    SUT that decides a class (multiclass) and whose last layer with weights is linear, its outputs; ``None`` when it cannot tell."""
    if module is None:
        return None
    own = getattr(module, "num_classes", None)
    if isinstance(own, int):
        return own
    for sub in module.modules():
        if isinstance(sub, ClassEmbedding):
            count = sub.config.num_classes
        else:
            count = vars(sub).get("num_classes")
        if isinstance(count, int) and sub is not module:
            return count
    if getattr(module, "decision_is_class", False):  # a class-deciding SUT, only when its last layer is the linear head
        leaves = [m for m in module.modules() if next(m.children(), None) is None and any(True for _ in m.parameters())]
        if leaves and isinstance(leaves[-1], torch.nn.Linear):
            return int(leaves[-1].out_features)
    return None

__all__ = ["CASE_ARGS", "CaseFactory", "Components", "build_components", "build_trainer_args", "class_count"]
