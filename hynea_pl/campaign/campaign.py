"""A campaign as one typed object: what every test case of a run shares, built once from the config.

:meth:`Campaign.from_config` parses a config (a file, or an already parsed namespace / LightningCLI), starts or
joins the campaign's processes and builds this process's frozen components once; ``fit``
(:func:`hynea_pl.campaign.runner.run_campaign`), ``replay`` and ``sweep`` use the campaign, never the LightningCLI
object. :meth:`Campaign.validate` refuses a campaign that cannot run as configured, before any case runs or any
run folder is created.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from jsonargparse import Namespace
from lightning.pytorch.cli import LightningCLI

from hynea_pl.callbacks import CaseImageLogger, FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.campaign.case_types import CaseSelection, TestCase
from hynea_pl.campaign.config import STEERS_AND_JUDGES, RunOutput, check_method, parse_config
from hynea_pl.campaign.distributed import Shard, launch
from hynea_pl.campaign.factory import CaseFactory, Components, build_components, build_trainer_args, class_count
from hynea_pl.evaluation.stability import StabilityVariants
from hynea_pl.generators import Generator
from hynea_pl.generators.protocol import conditions_beyond_class
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.suts import SUT
from hynea_pl.suts.family import model_data, model_families

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
            own nested components, e.g. HyNeA's ``reference``).
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
    def from_config(cls, source: str | Path | Namespace | dict | LightningCLI,
                    overrides: Sequence[str] = ()) -> Campaign:
        """Build and validate the campaign of a config: ``source`` is a config file (``overrides`` are further
        ``--section.option VALUE`` arguments), a parsed namespace (or its dict), or a LightningCLI that parsed it.

        Refuses a wrong method x task pair from the config alone (:func:`hynea_pl.campaign.config.check_method`),
        then starts (or joins) the campaign's processes and builds this process's frozen components once (generator,
        SUT, oracle, realism and the method's nested components) and a first module, to fail early on a bad config.
        Rank 0 builds first (a zoo is built on first use), the other ranks then load what it cached. Per-case
        objects are built by :meth:`build_case`."""
        if isinstance(source, (str, Path)):
            parsed = parse_config(["--config", str(source), *overrides])
        elif overrides:
            raise ValueError("overrides go with a config file, not with an already parsed config")
        else:
            parsed = source if isinstance(source, LightningCLI) else parse_config(source)
        config = parsed.config
        check_method(config)
        stability = StabilityVariants(**vars(config.stability))
        shard = launch(config.trainer)
        if not shard.is_main:
            shard.barrier()
        try:
            components = build_components(config).to(shard.device)
            factory = CaseFactory(config, components)
            selection = CaseSelection(**vars(config.cases))
            check_classes(selection, components)  # before a first module sees a class out of range
            first = factory.build((selection.classes or [None])[0], selection.seed)
        finally:
            if shard.is_main:
                shard.barrier()
        campaign = cls(components=components, factory=factory, selection=selection,
                       budget=int(config.budget.max_evals), trainer=config.trainer,
                       output=RunOutput(**vars(config.output)).resolved(first.method_name), shard=shard,
                       config_text=parsed.parser.dump(config, skip_none=False),
                       stability=stability)
        campaign.validate()
        return campaign

    def validate(self) -> None:
        """Refuse a campaign that cannot run as configured; called before any case runs or any run folder is
        created (by :meth:`from_config`, else by ``run_campaign``). The method must implement the SUT's task, the
        classes must be within the generator's and SUT's classes (:func:`check_classes`), the oracle must be
        independent of the model that steers the search (:func:`check_judge_independent`), and real-image origins
        need an invertible generator and an image folder that exists."""
        self.factory.model_class.check_task(self.sut.task, self.method)
        check_batching(self.selection, self.factory.model_class, self.method, self.callbacks, self.generator)
        if self.selection.batch_size > 1 and int(self.factory.shared_args.get("attempts", 1)) > 1:
            raise ValueError(f"cases.batch_size = {self.selection.batch_size}: a batch runs each case once; "
                             "model.init_args.attempts > 1 runs with --cases.batch_size 1")
        check_classes(self.selection, self.components)
        check_judge_independent(self.oracle, self.reference, self.sut)
        check_method_data(self.method_models, self.oracle, self.realism)
        if self.selection.images is not None:  # origins from real images: an invertible generator, a folder there
            from hynea_pl.campaign.image_cases import check_image_source

            check_image_source(self.selection, self.generator)
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
        """The method's shared ``reference`` (the model that steers the search), or ``None``."""
        return self.factory.nested("reference")

    @property
    def method_models(self) -> dict[str, torch.nn.Module]:
        """The method's own models (:data:`METHOD_MODELS` it has: what steers or checks its search), by argument."""
        return {name: model for name in METHOD_MODELS if isinstance(model := self.factory.nested(name), torch.nn.Module)}

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


def check_classes(selection: CaseSelection, components: Components) -> None:
    """Refuse a ``cases.classes`` entry the generator or a multiclass SUT does not have (one line: the key, the
    class and the range)."""
    for name, module in (("generator", components.generator), ("SUT", components.sut)):
        if name == "SUT" and not getattr(module, "decision_is_class", False):
            continue
        count = class_count(module)
        if count is None:
            continue
        for value in selection.classes or []:
            if value is not None and not 0 <= value < count:
                raise ValueError(f"cases.classes = {list(selection.classes)}: class {value} is out of range "
                                 f"(0-{count - 1}, the {name}'s {count} classes)")


def check_batching(selection: CaseSelection, model_class: type[TestCaseModule], method: str,
                   callbacks: Sequence[CaseCallback], generator: Generator | None = None) -> None:
    """Refuse ``cases.batch_size > 1`` (one line) for a method that runs one case per Trainer only, with case
    callbacks other than the default ones (a batch applies their rules per case itself), or with a generator that
    conditions each case on more than its class (a scene's layout: a batch's slots hold one image each)."""
    if selection.batch_size <= 1:
        return
    if generator is not None and conditions_beyond_class(generator):
        raise ValueError(f"cases.batch_size = {selection.batch_size}: {type(generator).__name__} conditions each case "
                         "on its own layout, so its cases run one per Trainer (use --cases.batch_size 1)")
    if model_class.batched_module() is None:
        raise ValueError(f"cases.batch_size = {selection.batch_size}: {method} runs one case per Trainer; "
                         "only HyNeA batches cases (use --cases.batch_size 1)")
    if tuple(callbacks) != DEFAULT_CALLBACKS:
        raise ValueError(f"cases.batch_size = {selection.batch_size} applies the default case callbacks' rules per "
                         "case; a campaign with other case callbacks runs with --cases.batch_size 1")


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


def _weight_digests(module: torch.nn.Module) -> set[tuple]:
    return {(tuple(p.shape), hashlib.blake2b(p.detach().float().cpu().contiguous().numpy().tobytes(),
                                             digest_size=16).digest())
            for p in module.parameters() if p.numel() >= 64}


#: A method's arguments that hold its own models (they steer its search or check its results): each must learn from
#: other data than the verdict (:func:`check_method_data`), and the reference of another family than every judge.
METHOD_MODELS = ("reference", "acceptance")


def check_method_data(method_models: dict[str, torch.nn.Module], oracle: torch.nn.Module | None,
                      realism: torch.nn.Module | None) -> None:
    """Refuse (one line) a method's model that learnt from data the verdict uses: the judges' training data or the
    realism test's reference (as the models name them, :func:`hynea_pl.suts.family.model_data`). A method that learnt
    from the judges' digits would find what the judges accept, not what is real. Also refuses an ``acceptance``
    model of a judge's family."""
    verdict = model_data(oracle) | model_data(realism)
    for name, model in method_models.items():
        shared = sorted(model_data(model) & verdict)
        if shared:
            raise ValueError(f"model.init_args.{name} learnt from {', '.join(shared)}, which the verdict's judges or "
                             "realism test use: a method's models must learn from other data (the zoo's method split)")
        families = sorted(model_families(model) & model_families(oracle)) if name != "reference" and oracle else []
        if families:
            raise ValueError(f"model.init_args.{name} is of the family {', '.join(families)}, like a judge of the "
                             "oracle: a method's models must be of other families than every judge")


def check_judge_independent(oracle: torch.nn.Module | None, reference: torch.nn.Module | None,
                            sut: torch.nn.Module | None = None) -> None:
    """Refuse a judge that shares weights with the model steering the search (the same network under another
    config spelling counts too), or whose model family is that of the ``reference`` that keeps the origin's class
    (a judge of its family shares its blind spots and would confirm what it steered towards). A judge of the SUT's
    family only gets a warning: it would share the SUT's blind spots and so count fewer failures, never more."""
    if oracle is None:
        return
    if reference is not None and _weight_digests(oracle) & _weight_digests(reference):
        raise ValueError(STEERS_AND_JUDGES)
    judges = model_families(oracle)
    shared = sorted(judges & model_families(reference)) if reference is not None else []
    if shared:
        raise ValueError(f"the oracle has a judge of the family {', '.join(shared)}, like the model.reference that "
                         "steers the search: a judge must be of another family than every model that steers it")
    shared = sorted(judges & model_families(sut)) if sut is not None else []
    if shared:
        warnings.warn(f"the oracle has a judge of the SUT's family ({', '.join(shared)}): it may share the SUT's "
                      "blind spots and undercount valid failures", stacklevel=2)


__all__ = ["DEFAULT_CALLBACKS", "METHOD_MODELS", "Campaign", "CaseCallback", "case_trainer_config", "check_batching",
           "check_classes", "check_judge_independent", "check_method_data"]
