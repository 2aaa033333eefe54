"""The campaign's config: the ``fit`` command's LightningCLI schema (sections, trainer defaults), parsed and checked.

:func:`parse_config` parses a config (file, command-line options, or an already parsed namespace) against the
schema; :meth:`hynea_pl.campaign.campaign.Campaign.from_config` then builds the typed campaign from it. Nothing
below that builder sees the LightningCLI object.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import lightning as L
import yaml
from jsonargparse import ArgumentError, Namespace
from jsonargparse.typing import import_object
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from hynea_pl.callbacks import SUTEvaluationBudget
from hynea_pl.campaign.case_types import CaseSelection
from hynea_pl.evaluation.judge import judges_task
from hynea_pl.evaluation.stability import StabilityVariants
from hynea_pl.errors import one_line
from hynea_pl.generators import Generator
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.metrics.typicality import TypicalityTest
from hynea_pl.suts import SUT

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


@dataclass
class RunOutput:
    """Where a campaign writes: ``root/name/`` (an existing folder is resumed, finished cases are kept).

    Args:
        root: parent folder of runs.
        name: run name (folder, W&B run-name prefix); ``{method}`` is replaced by the method name.
        method: method name written into every record; default: the model's ``method_name`` (``hynea``,
            ``giftbench-low-1e-4``, ``sinvad``, ...).
        resume: ``auto``: an existing folder is resumed only when its ``config.yaml`` matches this config (except
            the output, the logger and the case selection), else the run is refused naming the keys that differ;
            ``force``: resume it anyway and replace its ``config.yaml`` with this config.
    """

    root: str = "runs"
    name: str = "mnist_{method}"
    method: str | None = None
    resume: Literal["auto", "force"] = "auto"

    def resolved(self, method_name: str) -> RunOutput:
        """This output with ``method`` defaulted to the module's ``method_name`` and ``{method}`` in ``name``
        replaced."""
        method = self.method or method_name
        return RunOutput(self.root, self.name.replace("{method}", method), method, self.resume)


class CampaignCLI(LightningCLI):
    """The ``fit`` command's config: every case of ``cases`` is one fit of a fresh ``model`` with a fresh Trainer
    built from ``trainer``; the frozen ``generator`` and ``sut`` are linked into each model.

    ``model`` is any test-case LightningModule given as ``class_path`` + ``init_args`` whose constructor takes
    ``generator``, ``sut``, ``origin_class`` and ``seed`` and that subclasses
    :class:`hynea_pl.methods.TestCaseModule`: ``hynea_pl.methods.HyNeACase``, ``baselines.giftbench.GIFTbenchCase``,
    ``baselines.sinvad.SINVADCase``, or a user's own method.

    It only parses (and seeds, ``seed_everything``): the campaign is built from its ``config`` by
    :meth:`hynea_pl.campaign.campaign.Campaign.from_config`."""

    def __init__(self, args: list[str] | Namespace | dict | None = None) -> None:
        super().__init__(
            L.LightningModule, subclass_mode_model=True, run=False, args=args, save_config_callback=None,
            trainer_defaults=TRAINER_DEFAULTS, seed_everything_default=0, auto_configure_optimizers=False,
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
                                           "(hynea_pl.zoo.mnist.realism.ZooTypicality on the MNIST zoo).")
        parser.add_class_arguments(StabilityVariants, "stability", instantiate=False,
                                   help="The stability verdict: the semantics-preserving variants of a flipped "
                                        "result the SUT is asked about again (never seen by a method).")
        parser.add_class_arguments(CaseSelection, "cases", instantiate=False)
        parser.add_class_arguments(RunOutput, "output", instantiate=False)
        parser.add_class_arguments(SUTEvaluationBudget, "budget", instantiate=False)
        parser.link_arguments("generator", "model.init_args.generator", apply_on="instantiate")
        parser.link_arguments("sut", "model.init_args.sut", apply_on="instantiate")

    def instantiate_classes(self) -> None:
        """Nothing: the campaign's components are built by ``Campaign.from_config`` (once per process)."""


def parse_config(args: list[str] | Namespace | dict) -> CampaignCLI:
    """Parse ``fit``'s options (``["--config", "CONFIG.yaml", "--section.option", "VALUE", ...]``) or a parsed
    namespace against the schema; a wrong key or value raises one error naming it. Seeds ``seed_everything``."""
    if isinstance(args, list):
        _check_config_files(args)
    try:
        return CampaignCLI(args=args)
    except ArgumentError as error:
        hint = closest_option_hint(str(error))
        if not hint:
            raise
        raise ArgumentError(None, f"{one_line(error)}{hint}") from None


def _check_config_files(args: list[str]) -> None:
    """A ``--config`` file that is missing, empty or no mapping of sections: one line naming it."""
    for flag, value in zip(args, args[1:]):
        if flag != "--config":
            continue
        path = Path(value)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        try:
            content = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ValueError(f"config file {path} is not valid YAML{where}: "
                             f"{getattr(error, 'problem', None) or error}") from None
        if not isinstance(content, dict):
            what = "empty" if content is None else f"a {type(content).__name__}"
            raise ValueError(f"config file {path} is {what}, not a mapping of sections (generator, sut, model, "
                             "cases, budget, trainer, output)")


def known_keys() -> list[str]:
    """The schema's keys (sections, and the options of the sections it defines itself and of the Trainer)."""
    keys = ["seed_everything", "generator", "sut", "oracle", "realism", "stability", "model", "cases", "output",
            "budget", "trainer", "config"]
    for section, cls in (("stability", StabilityVariants), ("cases", CaseSelection), ("output", RunOutput), ("budget", SUTEvaluationBudget),
                         ("trainer", L.Trainer)):
        keys += [f"{section}.{name}" for name, p in inspect.signature(cls).parameters.items()
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return keys


def closest_option_hint(message: str) -> str:
    """``"; did you mean 'lr_max'?"`` for an unknown key in a jsonargparse message (an option a class does not
    accept, an unrecognized ``--section.option``), from the class's parameters or the schema's keys; ``""`` when
    nothing is close."""
    class_option = re.search(r"class_path '([\w.]+)'.*?Option '([\w.]+)' is not accepted", message, re.S)
    if class_option:
        try:
            cls = import_object(class_option.group(1))
            candidates = [name for name, p in inspect.signature(cls).parameters.items()
                          if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        except Exception:  # noqa: BLE001 - a hint is optional
            return ""
        unknown = class_option.group(2)
    else:
        plain = re.search(r"Option '([\w.]+)' is not accepted", message) or re.search(
            r"unrecognized arguments: --([\w.]+)", message)
        if not plain:
            return ""
        unknown = plain.group(1)
        candidates = [key for key in known_keys() if key.count(".") == unknown.count(".")]
    close = difflib.get_close_matches(unknown, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def bad_value(key: str, value: Any, allowed: str) -> ValueError:
    """The one-line error of a config value out of its range: the key, the value and what is allowed."""
    return ValueError(f"{key} = {value!r}: {allowed}")


def validate_config(config: Any) -> None:
    """Refuse, from the parsed config alone and before any model is loaded or any folder created, every count and
    range the config states that cannot run: an empty or negative class list, ``cases.n_per_class`` /
    ``cases.max_seed_tries`` / ``budget.max_evals`` below 1, ``trainer.max_steps`` below 1 (unless the method sets
    its own ``total_steps``), ``cases.case_ids`` that are no case of the selection, ``trainer.devices`` that is no
    device count, list or ``auto``. Classes beyond the SUT's or
    generator's number of classes are refused by :meth:`hynea_pl.campaign.campaign.Campaign.validate`."""
    from hynea_pl.campaign.case_types import case_id

    cases = config.cases
    classes = cases.classes
    if classes is not None and len(classes) == 0:
        raise bad_value("cases.classes", [], "give at least one class (or null for an unconditional generator)")
    for value in classes or []:
        if value is not None and value < 0:
            raise bad_value("cases.classes", list(classes), f"class {value} is out of range (classes are >= 0)")
    for key, value in (("cases.n_per_class", cases.n_per_class), ("cases.max_seed_tries", cases.max_seed_tries),
                       ("budget.max_evals", config.budget.max_evals)):
        if value is None or value < 1:
            raise bad_value(key, value, "must be >= 1")
    max_steps = config.trainer.get("max_steps")
    own_total = (config.model.get("init_args") or {}).get("total_steps")
    if not (max_steps is not None and max_steps >= 1) and not (own_total and max_steps in (None, -1)):
        raise bad_value("trainer.max_steps", max_steps, "must be >= 1 (or -1 with model.init_args.total_steps set)")
    devices = config.trainer.get("devices")
    if not (devices in (None, "auto", -1, "-1") or _positive_count(devices)
            or (isinstance(devices, (list, tuple)) and devices and all(_is_index(d) for d in devices))):
        raise bad_value("trainer.devices", devices, "must be a count >= 1, a list of device indices, 'auto' or -1")
    if cases.case_ids:
        known = [case_id(c, i) for c in (classes or [None]) for i in range(cases.n_per_class)]
        unknown = [cid for cid in cases.case_ids if cid not in set(known)]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            shown = known if len(known) <= 6 else [*known[:3], "...", *known[-2:]]
            raise bad_value("cases.case_ids", list(cases.case_ids),
                            f"no case {unknown[0]!r} in this selection (cases: {', '.join(shown)}){hint}")


def _positive_count(value: Any) -> bool:
    """A device count >= 1, as an int or a string of digits (Lightning reads both)."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 1) or (
        isinstance(value, str) and value.strip().isdigit() and int(value) >= 1)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_method(config: Any) -> None:
    """Refuse from the parsed config alone, before any model is loaded, a config value out of range
    (:func:`validate_config`), a ``model`` that is no test-case module and a method x task pair the method does not
    implement (e.g. GIFTbench on a detection SUT)."""
    validate_config(config)
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


def _same_component(a: Any, b: Any) -> bool:
    def plain(x: Any) -> Any:
        return x.as_dict() if hasattr(x, "as_dict") else x

    return plain(a) == plain(b)


def quiet_lightning_info() -> None:
    """A campaign fits many Trainers: keep Lightning's per-fit info lines (seed, devices, tips) out of the way."""
    for name in ("lightning.fabric.utilities.seed", "lightning.pytorch.utilities.rank_zero",
                 "lightning.fabric.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.WARNING)


__all__ = ["CampaignCLI", "RunOutput", "STEERS_AND_JUDGES", "TRAINER_DEFAULTS", "bad_value", "check_method",
           "parse_config", "quiet_lightning_info", "validate_config"]
