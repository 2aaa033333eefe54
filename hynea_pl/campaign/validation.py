"""Every check a campaign passes before any case runs or any run folder exists, each stated once.

Two entry points: :func:`validate_config` reads the parsed config alone, before any model is loaded (counts,
ranges, devices, case ids, the method's class and task); :func:`validate_campaign` checks the built campaign
(:meth:`hynea_pl.campaign.campaign.Campaign.validate`): the method's task, batching, classes against the
components, the verdict's independence of the method's own models (weights, families, data) and the image source.
Every refusal is one line naming the key.
"""

from __future__ import annotations

import difflib
import hashlib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from jsonargparse.typing import import_object

from hynea_pl.campaign.case_types import CaseSelection, case_id
from hynea_pl.evaluation.judge import judges_task
from hynea_pl.generators import ClassEmbedding, Generator
from hynea_pl.generators.inversion import check_invertible
from hynea_pl.generators.protocol import conditions_beyond_class
from hynea_pl.methods.base import TestCaseModule
from hynea_pl.suts.family import model_data, model_families

#: A method's arguments that hold its own models (they steer its search or check its results), a dotted name for an
#: option group's field (HyNeA's ``steering.model``, ``acceptance.test``; a baseline's ``reference``): each must be of
#: other families than every judge, share no weights with them and learn from other data than the verdict.
METHOD_MODELS = ("reference", "steering.model", "acceptance.test")


def bad_value(key: str, value: Any, allowed: str) -> ValueError:
    """The one-line error of a config value out of its range: the key, the value and what is allowed."""
    return ValueError(f"{key} = {value!r}: {allowed}")


# ---------------------------------------------------------------------------------------------- the config alone
def validate_config(config: Any) -> None:
    """Refuse, from the parsed config alone and before any model is loaded or any folder created: an empty or
    negative class list, ``cases.n_per_class`` / ``cases.max_seed_tries`` / ``budget.max_evals`` below 1,
    ``trainer.max_steps`` below 1 (unless the method sets its own ``total_steps``), ``trainer.devices`` that is no
    device count, list or ``auto``, ``cases.case_ids`` that are no case of the selection, a ``model`` that is no
    test-case module, a method x task pair the method does not implement, an oracle of another task and a plan
    larger than its data (:func:`check_plan`)."""
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
    own_total = ((config.model.get("init_args") or {}).get("search") or {}).get("total_steps")
    if not (max_steps is not None and max_steps >= 1) and not (own_total and max_steps in (None, -1)):
        raise bad_value("trainer.max_steps", max_steps, "must be >= 1 (or -1 with model.init_args.search.total_steps set)")
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
    method, sut = import_object(config.model.class_path), import_object(config.sut.class_path)
    if not (isinstance(method, type) and issubclass(method, TestCaseModule)):
        raise TypeError(f"model {config.model.class_path} is not a hynea_pl.methods.TestCaseModule; a method's test "
                        "case must subclass it (it is the protocol the campaign runs)")
    method.check_task(sut.task, method.display_name(dict(config.model.get("init_args") or {})))
    oracle = config.get("oracle")
    if oracle is not None and not judges_task(oracle_task := import_object(oracle.class_path).task, sut.task):
        raise ValueError(f"the oracle ({oracle.class_path}) judges {oracle_task} outputs, the SUT is {sut.task}")
    check_plan(config, method)


def check_plan(config: Any, method: type[TestCaseModule]) -> None:
    """Refuse, from the data's labels alone (no model built), a plan larger than its data, in one line with the
    numbers: ``cases.images`` (a folder, a CSV of labels or the zoo's held-out digits from ``start`` on) holding
    fewer images of a class than its selected cases need
    (:func:`check_plan_served`), and what the method's own data cannot serve (a
    method's :meth:`~hynea_pl.methods.TestCaseModule.check_case_plan`, e.g. natural's pool: a class it holds no image
    of). What the labels cannot tell (a missing folder, an unknown label, a zoo not built yet) is left to the checks
    that read the images; the images read are counted again there, before the run folder exists."""
    cases = config.cases
    if cases.images is not None:
        from hynea_pl.campaign.test_images import count_test_labels

        try:
            counts = count_test_labels(cases.images, labels_csv=cases.labels_csv)
        except (OSError, ValueError, RuntimeError, KeyError):
            counts = None
        if counts is not None:
            check_plan_served(cases, counts)
    method.check_case_plan(dict(config.model.get("init_args") or {}), cases)


def _images(n: int, adjective: str = "") -> str:
    return f"no {adjective}image" if n == 0 else f"{n} {adjective}image" + ("s" if n != 1 else "")


def check_plan_served(selection: CaseSelection, counts: Mapping[tuple[int, ...], int], skipped: int = 0) -> None:
    """Refuse a plan larger than its images: ``ValueError``, one line with the numbers, when ``cases.images`` holds
    fewer images of a class (``counts``: images per label, a 1-tuple per class) than its selected cases need, one
    origin each (:func:`~hynea_pl.campaign.case_types.images_needed`). Such a case could only end without an origin,
    so the campaign is refused before any case runs and before its run folder exists, never silently cut short.
    ``skipped``: unreadable files the read skipped (the counts are then of readable images).

    The counts are an upper bound on the cases served: an image the SUT misreads (or whose reconstruction it
    misreads) is passed over while the campaign selects its origins, and a case that runs out of images then ends
    without a valid origin, in its record, as before."""
    from hynea_pl.campaign.case_types import images_needed

    needed = images_needed(selection)
    short = {c: counts.get((c,), 0) for c, n in needed.items() if counts.get((c,), 0) < n}
    if not short:
        return
    source = f"cases.images ({selection.images}" + (
        f", labels from {selection.labels_csv})" if selection.labels_csv else ")")
    readable, note = ("readable ", f" ({skipped} unreadable file(s) skipped)") if skipped else ("", "")
    empty = [c for c, have in short.items() if have == 0]
    if empty:
        named, it = ", ".join(map(str, empty)), "it" if len(empty) == 1 else "them"
        raise ValueError(f"cases.classes = {list(selection.classes)} asks cases of class {named} but {source} holds "
                         f"{_images(0, readable)} of class {named}{note}: drop {it} from cases.classes or add "
                         f"images of {it}")
    fewest = min(short, key=short.get)  # the first of the classes with the fewest images
    have, asked = short[fewest], needed[fewest]
    if selection.case_ids:
        last = case_id(fewest, asked - 1)
        raise ValueError(f"cases.case_ids asks case {last} of class {fewest} but {source} holds "
                         f"{_images(have, readable)} of class {fewest}{note}, one origin per case in order: ask cases "
                         f"{case_id(fewest, 0)} to {case_id(fewest, have - 1)} of it at most")
    others = f" (the fewest; {len(short)} classes hold fewer than {asked})" if len(short) > 1 else ""
    raise ValueError(f"cases.n_per_class = {asked} asks {asked} cases of class {fewest} but {source} holds "
                     f"{_images(have, readable)} of class {fewest}{note}{others}: lower cases.n_per_class to at "
                     f"most {have}")


def _positive_count(value: Any) -> bool:
    """A device count >= 1, as an int or a string of digits (Lightning reads both)."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 1) or (
        isinstance(value, str) and value.strip().isdigit() and int(value) >= 1)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ---------------------------------------------------------------------------------------------- the built campaign
def validate_campaign(campaign: Any) -> None:
    """Refuse a built :class:`~hynea_pl.campaign.campaign.Campaign` (which imports this module) that cannot run as
    configured (one line each): the method must implement the SUT's task, the batch must suit the method, its
    callbacks and generator (:func:`check_batching`), the classes must be within the generator's and SUT's
    (:func:`check_classes`), the verdict must be independent of the method's own models
    (:func:`check_verdict_independent`), and real-image origins need an invertible generator and a folder that
    exists (:func:`check_image_source`)."""
    campaign.factory.model_class.check_task(campaign.sut.task, campaign.method)
    check_batching(campaign.selection, campaign.factory.model_class, campaign.method, campaign.custom_callbacks,
                   campaign.generator)
    check_classes(campaign.selection, campaign.generator, campaign.sut)
    check_verdict_independent(campaign.method_models, campaign.oracle, campaign.realism, campaign.sut)
    if campaign.selection.images is not None:
        check_image_source(campaign.selection, campaign.generator)


def class_count(module: torch.nn.Module | None) -> int | None:
    """How many classes a component knows: its own ``num_classes``, else that of its class embedding (a
    class-conditional generator: :class:`hynea_pl.generators.ClassEmbedding`, a DiT's label embedding), else, for a
    SUT that decides a class (multiclass) and whose last layer with weights is linear, its outputs; ``None`` when
    it cannot tell."""
    if module is None:
        return None
    own = getattr(module, "num_classes", None)
    if isinstance(own, int):
        return own
    for sub in module.modules():
        count = sub.config.num_classes if isinstance(sub, ClassEmbedding) else vars(sub).get("num_classes")
        if isinstance(count, int) and sub is not module:
            return count
    if getattr(module, "decision_is_class", False):  # a class-deciding SUT, only when its last layer is the linear head
        leaves = [m for m in module.modules() if next(m.children(), None) is None and any(True for _ in m.parameters())]
        if leaves and isinstance(leaves[-1], torch.nn.Linear):
            return int(leaves[-1].out_features)
    return None


def check_classes(selection: CaseSelection, generator: Generator, sut: torch.nn.Module) -> None:
    """Refuse a ``cases.classes`` entry the generator or a multiclass SUT does not have (the key, the class and the
    range)."""
    for name, module in (("generator", generator), ("SUT", sut)):
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
                   custom_callbacks: bool = False, generator: Generator | None = None) -> None:
    """Refuse ``cases.batch_size > 1`` for a method that runs one case per Trainer only, with case callbacks other
    than the default ones (a batch applies their rules per case itself), or with a generator that conditions each
    case on more than its class (a scene's layout: a slot holds one image)."""
    size = selection.batch_size
    if size <= 1:
        return
    if generator is not None and conditions_beyond_class(generator):
        raise ValueError(f"cases.batch_size = {size}: {type(generator).__name__} conditions each case on its own "
                         "layout, so its cases run one per Trainer (use --cases.batch_size 1)")
    if model_class.batched_module() is None:
        raise ValueError(f"cases.batch_size = {size}: {method} runs one case per Trainer; only HyNeA batches cases "
                         "(use --cases.batch_size 1)")
    if custom_callbacks:
        raise ValueError(f"cases.batch_size = {size} applies the default case callbacks' rules per case; a campaign "
                         "with other case callbacks runs with --cases.batch_size 1")


def _weight_digests(module: torch.nn.Module) -> set[tuple]:
    return {(tuple(p.shape), hashlib.blake2b(p.detach().float().cpu().contiguous().numpy().tobytes(),
                                             digest_size=16).digest())
            for p in module.parameters() if p.numel() >= 64}


def check_verdict_independent(method_models: dict[str, torch.nn.Module], oracle: torch.nn.Module | None,
                              realism: torch.nn.Module | None = None, sut: torch.nn.Module | None = None) -> None:
    """Refuse a verdict that is not independent of the method's own models (:data:`METHOD_MODELS`, by argument):
    a judge that shares weights with one (the same network under another config spelling counts too), a judge of
    its family (it shares its blind spots and would confirm what it steered towards), or a method's model that
    learnt from the data the verdict uses (the judges' training data, the realism test's reference, as the models
    name them: :func:`hynea_pl.suts.family.model_data`; it would find what the judges accept, not what is real).
    A judge of the SUT's family only gets a warning: it would count fewer failures, never more."""
    verdict_data = model_data(oracle) | model_data(realism)
    judges = model_families(oracle) if oracle is not None else set()
    judge_weights = _weight_digests(oracle) if oracle is not None and method_models else set()
    for name, model in method_models.items():
        role = f"model.init_args.{name}"
        if judge_weights & _weight_digests(model):
            raise ValueError(f"the oracle is the {role} that steers or checks the search: a model that steers or "
                             "checks a search must never judge it (give the oracle other members or another model)")
        shared = sorted(judges & model_families(model))
        if shared:
            raise ValueError(f"the oracle has a judge of the family {', '.join(shared)}, like the {role} that steers "
                             "or checks the search: a judge must be of another family than every such model")
        shared = sorted(model_data(model) & verdict_data)
        if shared:
            raise ValueError(f"{role} learnt from {', '.join(shared)}, which the verdict's judges or realism test "
                             "use: a method's models must learn from other data (the zoo's method split)")
    shared = sorted(judges & model_families(sut)) if sut is not None else []
    if shared:
        warnings.warn(f"the oracle has a judge of the SUT's family ({', '.join(shared)}): it may share the SUT's "
                      "blind spots and undercount valid failures", stacklevel=2)


def check_image_source(selection: CaseSelection, generator: Generator) -> None:
    """Refuse real-image origins the generator cannot invert, or a ``cases.images`` folder (or
    ``cases.labels_csv``) that is not there."""
    check_invertible(generator)
    source = str(selection.images)
    if not source.startswith("zoo://"):
        if not Path(source).is_dir():
            raise FileNotFoundError(f"cases.images = {source}: no such folder")
        if selection.labels_csv is not None and not (Path(source) / selection.labels_csv).is_file():
            raise FileNotFoundError(f"cases.labels_csv = {selection.labels_csv}: not found in {source}")


__all__ = ["METHOD_MODELS", "bad_value", "check_batching", "check_classes", "check_image_source", "check_plan", "check_plan_served",
           "check_verdict_independent", "class_count", "validate_campaign", "validate_config"]
