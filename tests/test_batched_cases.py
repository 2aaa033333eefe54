"""Batched HyNeA (``--cases.batch_size B``): every case's record at B = 4 is the record of the same case at B = 1,
including a case that ends early and slots refilled by later cases; methods that cannot batch are refused; the
population baselines score a generation in one SUT call."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from method_runs import records, tiny_fit_args
from records_regression import ABS, REL, differences, stable
from safetensors.torch import load_file
from test_baselines_cases import CountingSUT, counting_sut, make_trainer
from tiny_components import DIGIT_CENTROIDS, PAPER_HYNEA, tiny_generator, tiny_sut

from hynea_pl.baselines.giftbench import GIFTbenchCase
from hynea_pl.baselines.sinvad import SINVADCase
from hynea_pl.callbacks import SUTEvaluationBudget
from hynea_pl.cli import main
from hynea_pl.hypernets import ControlProjector
from hynea_pl.images import load_image
from hynea_pl.methods import HyNeACase
from hynea_pl.methods.batched import BatchedHyNeA
from hynea_pl.methods.hynea_options import Acceptance, PaperSearch
from hynea_pl.methods.batched_adapters import StackedAdapters

#: six cases, in this order, of the SUT tiny_components.DigitCentroids (every pixel moves it): in the fast variant
#: they end at different steps (c1-0 last), so slots are refilled while others run on; at B = 4 the fifth and sixth
#: cases take freed slots
CLASSES = (0, 4, 1, 2, 3, 5)
#: the paper's HyNeA, with learning rates high enough that the cases flip within 6 steps
FAST = (*PAPER_HYNEA, "--model.init_args.search.stop_on", "flip",
        "--model.init_args.acceptance.margin", "0", "--model.init_args.search.lr_max", "0.1", "--model.init_args.search.lr_min", "0.01",
        "--model.init_args.save_adapters", "true")
#: the shipped config (steered by the reference: its views, its stop rule; the stop margin; the acceptance test; a
#: case without an accepted result runs again, aimed at its next target), a case's runs one after the other, three
#: runs a case at most (as the shipped nine, in a third of the time)
SHIPPED = ("--cases.spare_slots", "false", "--model.init_args.retries.attempts", "3")
#: the paper's HyNeA stopped at its target within 3 steps, with up to 9 runs a case: measured, c1-0's first run misses
#: and its second finds, while c3-0 misses on every target; at B = 4 both run later runs in the free slots
RETRIED = (*PAPER_HYNEA, "--model.init_args.search.stop_on", "target", "--model.init_args.acceptance.margin", "0",
           "--model.init_args.search.lr_max", "0.05", "--model.init_args.search.lr_min", "0.005", "--model.init_args.retries.attempts", "9")


def fit_batched(root, name: str, batch_size: int, *extra: str, max_steps: int = 6) -> list[dict]:
    args = [*tiny_fit_args("hynea", root, budget=60, max_steps=max_steps, classes=CLASSES, sut=DIGIT_CENTROIDS),
            "--output.name", name,
            "--cases.batch_size", str(batch_size), *extra]
    assert main(args) == 0
    return records(root / name)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fast", "shipped"])
def test_batched_records_are_the_records_of_one_case_at_a_time(variant, tiny_zoo, tmp_path):
    extra = {"fast": FAST, "shipped": SHIPPED}[variant]
    single = {r["case_id"]: r for r in fit_batched(tmp_path, "b1", 1, *extra)}
    batched = {r["case_id"]: r for r in fit_batched(tmp_path, "b4", 4, *extra)}
    assert sorted(batched) == sorted(single) and len(batched) == len(CLASSES)
    if variant == "fast":
        early = [cid for cid, r in single.items() if r["diagnostics"]["stop_reason"] == "flipped"]
        assert early and all(single[cid]["steps"] < 6 for cid in early), "a case ends early (its slot is refilled)"
    for cid, one in single.items():
        many = batched[cid]
        for key in ("flipped", "result_step", "target", "sut_evals", "steps", "result_label", "error"):
            assert many[key] == one[key], (cid, key)
        assert many["diagnostics"]["stop_reason"] == one["diagnostics"]["stop_reason"]
        # a batch of 4 runs other kernels than a batch of 1: floats within the golden records' tolerances
        found = [d for d in differences({**stable(one), "run": None}, {**stable(many), "run": None}, rel=REL,
                                        abs_=ABS)]
        assert not found, (cid, found)
        image_one = load_image(tmp_path / "b1" / one["result_image"])
        image_many = load_image(tmp_path / "b4" / many["result_image"])
        torch.testing.assert_close(image_many, image_one, atol=1.5 / 255, rtol=0)  # one 8-bit level at most
        if one["adapter"]:  # a flipped case's saved HyperNet and projector: the weights that made its result
            for part in ("hypernet", "projector"):
                weights = [load_file(next((run / one["adapter"] / part).glob("*.safetensors")))
                           for run in (tmp_path / "b1", tmp_path / "b4")]
                assert weights[0].keys() == weights[1].keys()
                assert all(weights[1][key].shape == weights[0][key].shape for key in weights[0])
                # AdamW moves a weight by about the learning rate whatever its gradient's size: where a gradient is
                # within rounding of zero its sign, and so that step, differs between a batch of 4 and of 1, so the
                # adapter is compared as a whole, not weight by weight (a 16-element bias of a zero-initialised
                # layer can differ by its own size)
                one_part, many_part = (torch.cat([w[key].flatten() for key in sorted(w)]) for w in weights)
                gap = (many_part - one_part).norm() / one_part.norm().clamp_min(1e-3)
                assert gap <= 0.25, (cid, part, float(gap))  # measured: at most 0.093
    if variant == "fast":
        assert any(r["adapter"] for r in single.values()), "an adapter was saved and compared"
    else:
        retried = [cid for cid, r in single.items() if len((r["diagnostics"] or {}).get("attempts", [])) > 1]
        assert retried, "a case ran again (in the batch: in the next free slot)"
        for cid in retried:
            assert batched[cid]["diagnostics"]["attempts"] == single[cid]["diagnostics"]["attempts"], cid


@pytest.mark.slow
def test_later_runs_take_free_slots_and_the_first_found_result_ends_the_case(tiny_zoo, tmp_path, capsys):
    """Once no planned case waits, a case whose run missed runs its next targets side by side in the free slots: the
    first run that finds ends the case (the others stop: ``case_done``), every run's evaluations count, and the case
    finds what it finds one run at a time; the console says which run starts where and why."""
    single = {r["case_id"]: r for r in fit_batched(tmp_path, "b1", 1, *RETRIED, max_steps=3)}
    capsys.readouterr()
    batched = {r["case_id"]: r for r in fit_batched(tmp_path, "b4", 4, *RETRIED, max_steps=3)}
    out = capsys.readouterr().out
    assert sorted(batched) == sorted(single)
    side_by_side = []
    for cid, one in single.items():
        many = batched[cid]
        for key in ("flipped", "target", "result_label", "error"):
            assert many[key] == one[key], (cid, key)
        runs = (many["diagnostics"] or {}).get("attempts") or [{"sut_evals": many["sut_evals"]}]
        assert many["sut_evals"] == sum(run["sut_evals"] for run in runs) <= 60, cid
        assert [run.get("attempt", 0) for run in runs] == sorted(run.get("attempt", 0) for run in runs)
        if any(run["stop_reason"] == "case_done" for run in runs[1:]):
            side_by_side.append(cid)
            assert many["sut_evals"] > one["sut_evals"], "the runs stopped beside the found one count too"
    assert side_by_side == ["c1-0"]
    assert "c1-0: run 3 (target 5) starts in a free slot beside its other runs" in out
    assert "c3-0: run 1 (target 2) ended without an accepted result after 3 steps" in out


@pytest.mark.slow
def test_a_method_that_cannot_batch_is_refused_in_one_line(tiny_zoo, tmp_path, capsys):
    args = [*tiny_fit_args("sinvad", tmp_path, budget=60), "--cases.batch_size", "4"]
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "only HyNeA batches cases" in err


class CallSizes(CountingSUT):
    """Records the batch size of every SUT call."""

    def __init__(self, model: torch.nn.Module, **kwargs) -> None:
        super().__init__(model, **kwargs)
        self.calls: list[int] = []

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.calls.append(images.shape[0])
        return super().forward(images)


@pytest.mark.parametrize("method, sizes", [(GIFTbenchCase, [1, 25, 15]), (SINVADCase, [1, 50, 30])])
def test_population_baselines_score_each_generation_in_one_sut_call(method, sizes):
    """GIFTbench and SINVAD already batch: the origin once, then every generation's new individuals in one call."""
    sut = counting_sut(CallSizes)
    case = method(tiny_generator(num_inference_steps=1), sut, origin_class=3, seed=5)
    make_trainer([SUTEvaluationBudget(10_000)], max_steps=2).fit(case)
    assert sut.calls == sizes and case.sut_evals == sum(sizes[1:])


def _real_size():
    """benchmarks/real_size.py as a module (registered first: it defines dataclasses)."""
    if "real_size" not in sys.modules:
        path = Path(__file__).parents[1] / "benchmarks" / "real_size.py"
        spec = importlib.util.spec_from_file_location("real_size", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["real_size"] = module
        spec.loader.exec_module(module)
    return sys.modules["real_size"]


@pytest.mark.parametrize("name", ["sd15-yolov8", "dit-xl2-wrn50", "celebahq-ldm-resnet50"])
def test_stacked_hypernets_give_each_slot_its_own_chain_for_every_generator_family(name):
    """Guided text UNet + task ControlNet, DiT (nested context), unconditional UNet (hooks): two slots with
    different HyperNet weights give each slot the latents its own HyperNet gives alone."""
    real_size = _real_size()
    torch.manual_seed(0)
    backbone = real_size.BACKBONES[name](True, 2, {})
    generator = backbone.generator
    hypernets = [generator.make_hypernet() for _ in range(2)]
    with torch.no_grad():
        for net in hypernets:
            for p in net.parameters():
                p.add_(torch.randn_like(p) * 0.05)  # no longer zero: the residuals differ per slot
    projector = ControlProjector((3,), generator.latent_shape)
    stack = StackedAdapters(hypernets[0], projector, 2)
    for slot, net in enumerate(hypernets):
        stack.load(slot, {"hypernet": net, "projector": projector})
    noise = torch.cat([generator.initial_noise(1), generator.initial_noise(2)])
    control = torch.randn(2, *generator.latent_shape)
    with torch.no_grad():
        together = generator.denoise(noise, backbone.origin_class, hypernet=stack.hypernet(), control=control)
        for slot, net in enumerate(hypernets):
            alone = generator.denoise(noise[slot:slot + 1], backbone.origin_class, hypernet=net,
                                      control=control[slot:slot + 1])
            torch.testing.assert_close(together[slot:slot + 1], alone, rtol=1e-4, atol=1e-4)
        one = generator.denoise(noise[1:], backbone.origin_class, hypernet=stack.hypernet(torch.tensor([1])),
                                control=control[1:])
        torch.testing.assert_close(one, together[1:], rtol=1e-4, atol=1e-4)


def test_real_size_runs_reduced_backbones_at_two_batch_sizes():
    rows = _real_size().main(["--reduced", "--device", "cpu", "--batch-sizes", "1", "4", "--steps", "2"])
    assert [(r["backbone"], r["batch_size"]) for r in rows] == [
        (b, s) for b in ("sd15-yolov8", "dit-xl2-wrn50", "celebahq-ldm-resnet50") for s in (1, 4)]
    assert all(r["s_per_step"] > 0 and r["steps"] == 2 for r in rows)


class NaNAtStep2(HyNeACase):
    """Its loss becomes NaN at its step 2 (only this case of the batch)."""

    def case_step(self, step, latents, images, output, reference_output):
        output = output * float("nan") if step == 2 else output
        return super().case_step(step, latents, images, output, reference_output)


def test_a_failing_case_leaves_the_batch_alone_and_its_slot_is_refilled():
    """Three cases in two slots: the second fails at its step 2 (its error, its steps), the third takes its slot;
    every case runs its steps, and the batch ends with its last case."""
    generator, sut = tiny_generator(num_inference_steps=1), tiny_sut()
    never = Acceptance(margin=1e9)  # no step is found: every case runs its steps
    planned = [HyNeACase(generator, sut, origin_class=1, seed=1, acceptance=never),
               NaNAtStep2(generator, sut, origin_class=2, seed=2, acceptance=never),
               HyNeACase(generator, sut, origin_class=3, seed=3, acceptance=never)]
    for case in planned:
        case.setup("fit")
    queue = iter(planned[1:])
    ended: list[tuple[int, int, str | None]] = []
    batch = BatchedHyNeA(planned[0], lambda: next(queue, None),
                         lambda case, steps, error: ended.append((case.hparams.seed, steps, type(error).__name__
                                                                  if error else None)),
                         slots=2, max_steps=4, max_evals=100)
    make_trainer([], max_steps=-1).fit(batch)
    assert sorted(ended) == [(1, 4, None), (2, 1, "NonFiniteLossError"), (3, 4, None)]
    assert [seed for seed, _, _ in ended] == [2, 1, 3]  # the failed case left first, the refilled one last
    assert planned[1].sut_evals == 2 and planned[0].sut_evals == planned[2].sut_evals == 4
    assert planned[0].stop_reason == planned[2].stop_reason == "max_steps"
    assert not batch.active


def test_a_case_whose_schedule_ends_before_its_steps_fails_as_at_batch_size_1():
    """A OneCycle schedule shorter than the case's steps (``total_steps`` < ``max_steps``) fails the case at the same
    step with torch's error, at B = 1 and in a batch, where the other case goes on."""
    generator, sut = tiny_generator(num_inference_steps=1), tiny_sut()
    never = Acceptance(margin=1e9)
    alone = HyNeACase(generator, sut, origin_class=1, seed=1, acceptance=never, search=PaperSearch(total_steps=2))
    trainer = make_trainer([], max_steps=4)
    with pytest.raises(ValueError, match="Tried to step 3 times") as single:
        trainer.fit(alone)
    planned = [HyNeACase(generator, sut, origin_class=c, seed=c, acceptance=never, search=PaperSearch(total_steps=t))
               for c, t in ((1, 2), (2, None))]
    for case in planned:
        case.setup("fit")
    queue, ended = iter(planned[1:]), []
    batch = BatchedHyNeA(planned[0], lambda: next(queue, None),
                         lambda case, steps, error: ended.append((case, steps, error)), slots=2, max_steps=4,
                         max_evals=100)
    make_trainer([], max_steps=-1).fit(batch)
    assert [(case.hparams.seed, steps, str(error) if error else None) for case, steps, error in ended] == [
        (1, trainer.global_step, str(single.value)), (2, 4, None)]


def test_a_run_resumes_at_another_batch_size(tmp_path):
    """A case's record does not depend on its batch, so a rerun may change ``cases.batch_size`` (not the method)."""
    from hynea_pl.campaign.records import CONFIG_FILE, config_differences

    saved = "cases:\n  batch_size: 1\n  seed: 0\nmodel:\n  init_args:\n    search:\n      lr_max: 0.003\n"
    (tmp_path / CONFIG_FILE).write_text(saved)
    assert config_differences(tmp_path, saved.replace("batch_size: 1", "batch_size: 16")) == []
    assert config_differences(tmp_path, saved.replace("0.003", "0.01")) == ["model.init_args.search.lr_max"]
