"""The campaign's config: the ``fit`` command's LightningCLI schema (sections, trainer defaults) and its checks."""

from __future__ import annotations

import hashlib
import logging
import warnings
from typing import Any

import lightning as L
import torch
from jsonargparse.typing import import_object
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from hynea_pl.callbacks import SUTEvaluationBudget
from hynea_pl.campaign.cases import CaseSelection
from hynea_pl.campaign.distributed import launch
from hynea_pl.campaign.factory import CaseFactory, build_components
from hynea_pl.campaign.runner import RunOutput, run_campaign
from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT
from hynea_pl.suts.family import model_families
from hynea_pl.evaluation.judge import judges_task

#: Trainer defaults of a test case: no checkpoint of the frozen models, no logger unless configured.
TRAINER_DEFAULTS = {
    "max_steps": 100,
    "max_epochs": -1,
    "accelerator": "auto",
    "devices": 1,
    "logger": False,
    "enable_checkpointing": False,
    "enable_model_summary": False,
    "enable_progress_bar": False,
    "num_sanity_val_steps": 0,
    "log_every_n_steps": 1,
}


class CampaignCLI(LightningCLI):
    """A campaign: every case of ``cases`` is one fit of a fresh ``model`` with a fresh Trainer built from
    ``trainer``; the frozen ``generator`` and ``sut`` are linked into each model.

    ``model`` is any test-case LightningModule given as ``class_path`` + ``init_args`` whose constructor takes
    ``generator``, ``sut``, ``origin_class`` and ``seed`` and that subclasses
    :class:`hynea_pl.methods.TestCaseModule`: ``hynea_pl.methods.HyNeACase``, ``baselines.giftbench.GIFTbenchCase``,
    ``baselines.sinvad.SINVADCase``, or a user's own method."""

    def __init__(self, args: list[str] | None = None) -> None:
        super().__init__(
            L.LightningModule, subclass_mode_model=True, run=False, args=args, save_config_callback=None, trainer_defaults=TRAINER_DEFAULTS,
            seed_everything_default=0, auto_configure_optimizers=False,
            # the checkpoint-hparams instantiator stores the *parsed* config as hparams; per-case overrides
            # (origin class, seed) must reach the module, and test cases are never reloaded from checkpoints
            load_from_checkpoint_support=False,
            parser_kwargs={"exit_on_error": False, "prog": "python -m hynea_pl fit",
                           "description": "Generate failure-inducing test inputs: one fit per test case."},
        )

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_subclass_arguments(Generator, "generator", required=True,
                                      help="The frozen generator (class_path + init_args).")
        parser.add_subclass_arguments(SUT, "sut", required=True,
                                      help="The system under test (class_path + init_args).")
        parser.add_subclass_arguments(SUT, "oracle", required=False,
                                      help="The validity oracle: an independent judge of the same task as the SUT "
                                           "that gives every case its verdict (valid_failure, semantic_change, "
                                           "ambiguous, no_flip); it must never be the model that steers the search.")
        parser.add_subclass_arguments(TypicalityTest, "realism", required=False,
                                      help="The realism test of the verdict: a result the judges read as the origin's "
                                           "class that fails it is 'degraded', not a valid failure "
                                           "(hynea_pl.zoo.realism.ZooTypicality on the MNIST zoo).")
        parser.add_class_arguments(CaseSelection, "cases", instantiate=False)
        parser.add_class_arguments(RunOutput, "output", instantiate=False)
        parser.add_class_arguments(SUTEvaluationBudget, "budget", instantiate=False)
        parser.link_arguments("generator", "model.init_args.generator", apply_on="instantiate")
        parser.link_arguments("sut", "model.init_args.sut", apply_on="instantiate")

    def instantiate_classes(self) -> None:
        """Start (or join) the campaign's processes, then build this process's frozen components once (generator,
        SUT, oracle and the method's nested components) and a first model, to fail early on a bad config. Rank 0
        builds first (a zoo is built on first use), the other ranks then load what it cached. Per-case objects are
        built by :func:`run_campaign`."""
        check_method(self.config)
        self.shard = launch(self.config.trainer)
        if not self.shard.is_main:
            self.shard.barrier()
        try:
            self.components = build_components(self.config).to(self.shard.device)
            self.factory = CaseFactory(self.config, self.components)
            selection = self.config.cases
            self.model = self.factory.build((selection.classes or [None])[0], selection.seed)
        finally:
            if self.shard.is_main:
                self.shard.barrier()
        check_judge_independent(self.components.oracle, self.factory.nested("reference"), self.components.sut)


def check_method(config: Any) -> None:
    """Refuse from the parsed config alone, before any model is loaded, a ``model`` that is no test-case module
    and a method x task pair the method does not implement (e.g. GIFTbench on a detection SUT)."""
    method, sut = import_object(config.model.class_path), import_object(config.sut.class_path)
    if not (isinstance(method, type) and issubclass(method, TestCaseModule)):
        raise TypeError(f"model {config.model.class_path} is not a hynea_pl.methods.TestCaseModule; a method's test "
                        "case must subclass it (it is the protocol the campaign runs)")
    init_args = config.model.get("init_args") or {}
    method.check_task(sut.task, method.display_name(dict(init_args)))
    oracle = config.get("oracle")
    if oracle is not None:
        oracle_task = import_object(oracle.class_path).task
        if not judges_task(oracle_task, sut.task):
            raise ValueError(f"the oracle ({oracle.class_path}) judges {oracle_task} outputs, the SUT is {sut.task}")
        reference = init_args.get("reference")
        if reference is not None and _same_component(reference, oracle):
            raise ValueError(STEERS_AND_JUDGES)


STEERS_AND_JUDGES = ("the oracle is the model.reference that steers the search: a model that steers a search must "
                     "never judge it (give the oracle other members or another model)")


def _weight_digests(module: torch.nn.Module) -> set[tuple]:
    return {(tuple(p.shape), hashlib.blake2b(p.detach().float().cpu().contiguous().numpy().tobytes(),
                                             digest_size=16).digest())
            for p in module.parameters() if p.numel() >= 64}


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


def _same_component(a: Any, b: Any) -> bool:
    def plain(x: Any) -> Any:
        return x.as_dict() if hasattr(x, "as_dict") else x

    return plain(a) == plain(b)


def quiet_lightning_info() -> None:
    """A campaign fits many Trainers: keep Lightning's per-fit info lines (seed, devices, tips) out of the way."""
    for name in ("lightning.fabric.utilities.seed", "lightning.pytorch.utilities.rank_zero",
                 "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.WARNING)


def fit(args: list[str]) -> dict:
    quiet_lightning_info()
    # frozen generator and SUT stay in eval mode on purpose; Lightning warns about it at every fit
    warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode")
    # lightning 2.6 calls a torch pytree API that torch 2.14 deprecates; nothing for users to act on
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    # a population search trains no parameters (one step = one generation): Lightning's no-op optimizer is intended
    warnings.filterwarnings("ignore", message=r".*configure_optimizers.* returned .None., this fit will run with no")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
        cli = CampaignCLI(args=args)
    return run_campaign(cli)
