"""A campaign as one typed object: what every test case of a run shares, built once from the config.

:meth:`Campaign.from_config` parses a config (a file, a parsed config or namespace), starts or joins the campaign's
processes and has the config's parser build this process's frozen components once; ``fit``
(:func:`hynea_pl.campaign.runner.run_campaign`), ``replay`` and ``sweep`` use the campaign, never the parser.
:meth:`Campaign.validate` refuses a campaign that cannot run as configured (:mod:`hynea_pl.campaign.validation`),
before any case runs or any run folder is created.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from jsonargparse import Namespace
from jsonargparse.typing import import_object

from hynea_pl.callbacks import CaseImageLogger, FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.campaign.case_types import CaseSelection, TestCase
from hynea_pl.campaign.config import (
    FitConfig,
    RunOutput,
    build_trainer_args,
    parse_config,
)
from hynea_pl.campaign.distributed import Shard, launch
from hynea_pl.campaign.factory import CaseFactory, Components
from hynea_pl.campaign.profile import check_profile_sut
from hynea_pl.campaign.validation import (
    METHOD_MODELS,
    check_classes,
    validate_campaign,
    validate_config,
)
from hynea_pl.evaluation.stability import StabilityVariants
from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT

#: Builds one case's fresh callback from the campaign.
CaseCallback = Callable[["Campaign"], L.Callback]


def flip_early_stopping(campaign: Campaign) -> L.Callback:
    return FlipEarlyStopping()


def evaluation_budget(campaign: Campaign) -> L.Callback:
    return SUTEvaluationBudget(campaign.budget)


def image_logger(campaign: Campaign) -> L.Callback:
    return CaseImageLogger()


#: The callbacks every case runs under, after the trainer section's own and in this order: the flip early stop,
#: the SUT-evaluation budget and the image logging (hynea_pl.callbacks).
DEFAULT_CALLBACKS: tuple[CaseCallback, ...] = (flip_early_stopping, evaluation_budget, image_logger)


@dataclass
class Campaign:
    """One campaign process: the frozen components every case shares, how a case's module and Trainer are built,
    which cases run, the budget, where the run goes and this process's shard.

    Args:
        components: the frozen ``generator``, ``sut``, optional ``oracle`` and ``realism`` test, built once per
            process and shared by every case.
        factory: builds a case's fresh module (the configured method's class around the shared components and its
            own nested components, e.g. HyNeA's ``steering.model``).
        selection: the config's ``cases``.
        budget: SUT evaluations per case (``budget.max_evals``).
        trainer: the config's ``trainer`` section; each case gets its Trainer arguments (fresh callbacks and logger)
            from it.
        output: the run folder, ``method`` and ``{method}`` resolved.
        shard: this process's place among the campaign's processes.
        callbacks: what builds each case's own callbacks (after the trainer section's); default
            :data:`DEFAULT_CALLBACKS`.
        config_text: the parsed config as written to the run's ``config.yaml``; ``None``: none is written.
        stability: the variants a flipped result is asked about again (the config's ``stability``), or ``None``.
    """

    components: Components
    factory: CaseFactory
    selection: CaseSelection
    budget: int
    trainer: Namespace
    output: RunOutput
    shard: Shard = field(default_factory=Shard)
    callbacks: Sequence[CaseCallback] = DEFAULT_CALLBACKS
    config_text: str | None = None
    stability: StabilityVariants | None = field(default_factory=StabilityVariants)
    #: set by :meth:`validate`; ``dataclasses.replace`` makes a copy that is validated again
    validated: bool = field(default=False, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_config(cls, source: str | Path | FitConfig | Namespace | dict, overrides: Sequence[str] = ()) -> Campaign:
        """Build and validate the campaign of a config: ``source`` is a config file (``overrides`` are further
        ``--section.option VALUE`` arguments), a parsed config, or a parsed namespace (or its dict).

        Refuses what the config alone shows cannot run (:func:`hynea_pl.campaign.validation.validate_config`), then
        starts (or joins) the campaign's processes, and the config's parser builds this process's frozen components
        once (generator, SUT, oracle, realism and the method's nested components) and the case factory; a first
        module is built to fail early on a bad config. Rank 0 builds first (a zoo is built on first use), the other
        ranks then load what it cached. Per-case objects are built by :meth:`build_case`."""
        if isinstance(source, (str, Path)):
            parsed = parse_config(["--config", str(source), *overrides])
        elif overrides:
            raise ValueError("overrides go with a config file, not with an already parsed config")
        else:
            parsed = source if isinstance(source, FitConfig) else parse_config(source)
        config = parsed.config
        validate_config(config)
        shard = launch(config.trainer)
        if not shard.is_main:
            shard.barrier()
        try:
            built = parsed.instantiate()
            components = Components(built.generator, built.sut, built.get("oracle"), built.get("realism"))
            components.to(shard.device)
            factory = CaseFactory(import_object(config.model.class_path), built.model, components)
            check_classes(built.cases, components.generator, components.sut)  # before a module sees a wrong class
            check_profile_sut(config.get("profile"), components.sut)
            first = factory.build((built.cases.classes or [None])[0], built.cases.seed)
        finally:
            if shard.is_main:
                shard.barrier()
        campaign = cls(components=components, factory=factory, selection=built.cases,
                       budget=int(config.budget.max_evals), trainer=config.trainer,
                       output=built.output.resolved(first.method_name), shard=shard, config_text=parsed.dump(),
                       stability=built.stability)
        campaign.validate()
        return campaign

    def validate(self) -> None:
        """Refuse a campaign that cannot run as configured (:func:`hynea_pl.campaign.validation.validate_campaign`);
        called before any case runs or any run folder is created (by :meth:`from_config`, else by
        ``run_campaign``)."""
        validate_campaign(self)
        self.validated = True

    # ------------------------------------------------------------------ what the cases share
    @property
    def generator(self) -> Generator:
        return self.components.generator

    @property
    def sut(self) -> SUT:
        return self.components.sut

    @property
    def oracle(self) -> SUT | None:
        return self.components.oracle

    @property
    def realism(self) -> TypicalityTest | None:
        return self.components.realism

    @property
    def reference(self) -> Any:
        """The model that steers the method's search (HyNeA's ``steering.model``, a baseline's ``reference``), or
        ``None``."""
        steering = self.factory.nested("steering.model")
        return steering if steering is not None else self.factory.nested("reference")

    @property
    def method_models(self) -> dict[str, torch.nn.Module]:
        """The method's own models (:data:`METHOD_MODELS` it has: what steers or checks its search), by argument."""
        return {name: model for name in METHOD_MODELS if isinstance(model := self.factory.nested(name), torch.nn.Module)}

    @property
    def custom_callbacks(self) -> bool:
        """Whether the cases run under other callbacks than :data:`DEFAULT_CALLBACKS`."""
        return tuple(self.callbacks) != DEFAULT_CALLBACKS

    @property
    def method(self) -> str:
        """The method name written into every record."""
        return self.output.method

    # ------------------------------------------------------------------ per case
    def build_module(self, case: TestCase, **overrides: Any) -> TestCaseModule:
        """The case's fresh module around the shared components, its origin handed over when the campaign sampled
        it; ``overrides``: init arguments of another run of the case (:meth:`TestCaseModule.next_attempt`)."""
        model = self.factory.build(case.origin_class, case.seed, **overrides)
        if case.origin is not None or case.noise is not None or case.condition is not None:
            model.provide_origin(case.origin, case.noise, case.condition)
        return model

    def trainer_kwargs(self, case: TestCase, run_name: str | None = None) -> dict[str, Any]:
        """The case's Trainer arguments from the ``trainer`` section (fresh callbacks and logger, the logger named
        ``<run>/<case id>``), on this process's device; without the campaign's :attr:`callbacks`."""
        kwargs = build_trainer_args(case_trainer_config(self.trainer, case, run_name or self.output.name))
        return self.shard.case_trainer_kwargs(kwargs)

    def build_case(self, case: TestCase, run_name: str | None = None) -> tuple[TestCaseModule, dict[str, Any]]:
        """:meth:`build_module` and :meth:`trainer_kwargs` of a case."""
        return self.build_module(case), self.trainer_kwargs(case, run_name)

    def case_callbacks(self) -> list[L.Callback]:
        """A case's own fresh instances of the campaign's :attr:`callbacks`."""
        return [make(self) for make in self.callbacks]


def case_trainer_config(trainer: Any, case: TestCase, run_name: str) -> Any:
    """A copy of the config's ``trainer`` section for one case: its logger named ``<run>/<case id>`` and, for W&B,
    grouped under the campaign's run name."""
    cfg = copy.deepcopy(trainer)
    logger = cfg.get("logger")
    if logger is not None and hasattr(logger, "get") and logger.get("init_args") is not None:
        if "name" in logger.init_args:
            logger.init_args.name = f"{run_name}/{case.case_id}"
        if logger.class_path.endswith("WandbLogger") and not logger.init_args.get("group"):
            logger.init_args.group = run_name
    return cfg


__all__ = ["DEFAULT_CALLBACKS", "Campaign", "CaseCallback", "case_trainer_config"]
