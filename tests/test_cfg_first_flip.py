"""cfg-first-flip: the guidance schedule and its one-line errors, the first flipping guidance scale on a crafted LDM
(grey level = 0.2 x the guidance scale) and SUT (class 0 above a threshold), the exact budget and evaluation count,
the shared origin on a tiny LDM, and one end-to-end ``fit`` of the shipped config on the tiny zoo."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from diffusers import DDIMScheduler
from tiny_components import tiny_generator, tiny_sut
from tiny_stylegan import CraftedGAN, threshold_sut
from torch import Tensor, nn

from hynea_pl.baselines.cfg_first_flip import CFGFirstFlipCase, guidance, resolve_guidance_schedule
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.generators import DiffusionGenerator
from hynea_pl.generators.stylegan import StyleGANGenerator
from hynea_pl.methods import HyNeACase

LINEAR = (3.0, 2.6, 2.2, 1.8, 1.4, 1.0)


# ---------------------------------------------------------------------- a crafted LDM
class _Prediction(nn.Module):
    """A 'denoiser' on (1, 32, 32) latents; the crafted generator predicts its condition state everywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.config = SimpleNamespace(in_channels=1, sample_size=32)
        self.anchor = nn.Parameter(torch.zeros(()))  # the generator reads its device / dtype from a parameter


class _Decoder(nn.Module):
    """An 'autoencoder' whose decoded image ``(B, 1, 32, 32)`` in [0, 1] is the latent itself."""

    config = SimpleNamespace(scaling_factor=1.0, shift_factor=None)
    dtype = torch.float32

    def decode(self, latents: Tensor) -> SimpleNamespace:
        return SimpleNamespace(sample=latents * 2 - 1)


class CraftedLDM(DiffusionGenerator):
    """One DDIM step predicting the sample (x0): the conditional state is 0.2, the null one 0, so the image is a flat
    grey level ``0.2 s`` under guidance ``s > 1`` and 0.2 unguided (the generator's convention at ``s <= 1``)."""

    def __init__(self, guidance_scale: float = 3.0) -> None:
        net = _Prediction()
        scheduler = DDIMScheduler(prediction_type="sample", set_alpha_to_one=True, clip_sample=False)
        super().__init__(net, _Decoder(), scheduler=scheduler, num_inference_steps=1, guidance_scale=guidance_scale)
        self.net = net

    @property
    def denoiser(self) -> nn.Module:
        return self.net

    def encode_condition(self, condition: int | None, batch: int) -> tuple[Tensor, Tensor | None]:
        cond = torch.full((batch, 1), 0.2, device=self.device)
        return cond, (None if condition is None else torch.zeros_like(cond))

    def model_output(self, model_input: Tensor, t: Tensor, states: Tensor, control: Tensor | None,
                     hypernet: nn.Module | None) -> Tensor:
        return states.view(-1, 1, 1, 1).expand_as(model_input).clone()


def run(case: CFGFirstFlipCase, budget: int = 2700) -> L.Trainer:
    trainer = L.Trainer(max_steps=5000, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)])
    trainer.fit(case)
    return trainer


def crafted_case(threshold: float, **kwargs) -> CFGFirstFlipCase:
    return CFGFirstFlipCase(CraftedLDM(), threshold_sut(threshold), origin_class=0, seed=1, **kwargs)


# ---------------------------------------------------------------------- the schedule
def test_the_linear_schedule_scales_the_guidance_term_and_lists_are_checked():
    assert resolve_guidance_schedule("linear", 3.0) == LINEAR
    assert resolve_guidance_schedule("linear", 7.5) == (7.5, 6.2, 4.9, 3.6, 2.3, 1.0)
    assert resolve_guidance_schedule([3.0, 2.0, 1.0], 3.0) == (3.0, 2.0, 1.0)
    for bad in ([2.0, 1.0], [3.0, 3.5], [3.0, 2.0, 2.0], [3.0, 0.5], [3.0], []):
        with pytest.raises(ValueError, match=r"starts at the generator's guidance_scale 3.0") as error:
            resolve_guidance_schedule(bad, 3.0)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="unknown guidance schedule 'steep'"):
        resolve_guidance_schedule("steep", 3.0)


def test_a_bad_schedule_or_an_unguided_generator_is_one_clear_line():
    with pytest.raises(ValueError, match=r"^a guidance schedule starts at .* got \[3.0, 0.0\]$"):
        crafted_case(0.4, schedule=[3.0, 0.0])
    with pytest.raises(ValueError, match=r"samples without guidance \(guidance_scale 1.0 <= 1\)$"):
        CFGFirstFlipCase(CraftedLDM(guidance_scale=1.0), threshold_sut(0.4))
    with pytest.raises(ValueError, match="samples without guidance"):  # the GAN has no guidance to descend
        CFGFirstFlipCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(0.4))
    unconditional = CFGFirstFlipCase(CraftedLDM(), threshold_sut(0.4), origin_class=None)
    with pytest.raises(ValueError, match="no null condition for condition None"):
        unconditional.setup("fit")


# ---------------------------------------------------------------------- the search
@pytest.mark.parametrize(("threshold", "star", "probes"), [(0.5, 2.2, 2), (0.4, 1.8, 3), (0.3, 1.4, 4)])
def test_the_first_guidance_scale_that_flips_the_crafted_sut_is_found(threshold, star, probes):
    case = crafted_case(threshold)  # grey 0.2 s: class 0 down to ``threshold``, flips at the first scale below
    trainer = run(case)
    info = case.record_diagnostics()
    assert info == {"mode": "first-flip", "schedule": list(LINEAR), "guidance_star": star, "probes": probes}
    assert case.result.found and case.result.step == probes and int(case.result.output.argmax()) == 1
    assert case.result.image.mean().item() == pytest.approx(0.2 * star, abs=1e-6)
    assert [h["guidance"] for h in case.result.history] == list(LINEAR[1:probes + 1])
    assert [h["label"] for h in case.result.history] == [0] * (probes - 1) + [1]
    # one SUT evaluation per probe (the origin at 3.0 is read once, not counted), stop at the first flip
    assert case.sut_evals == probes == trainer.global_step == case.sut.images_seen - 1
    assert case.origin_image.mean().item() == pytest.approx(0.6, abs=1e-6)
    assert case.generator.guidance_scale == 3.0 and case.method_name == "cfg-first-flip"


def test_a_case_that_never_flips_descends_the_whole_schedule_and_keeps_its_origin():
    case = crafted_case(0.1, schedule=[3.0, 2.0, 1.0])
    trainer = run(case)
    info = case.record_diagnostics()
    assert info["guidance_star"] is None and info["probes"] == 2 == case.sut_evals == trainer.global_step
    assert not case.result.found and case.result.step == 0 and torch.equal(case.result.image, case.origin_image)
    assert case.method_name == "cfg-first-flip-custom"


def test_the_budget_is_exact_and_a_scored_image_is_free():
    case = crafted_case(0.1)  # never flips: 5 probes would be needed
    trainer = run(case, budget=3)
    assert case.sut_evals == 3 == trainer.global_step == case.record_diagnostics()["probes"]
    assert case.sut.images_seen - 1 == 3 and case._next is not None and not case.result.found
    seen = case.sut.images_seen
    outputs, fresh, _ = case.evaluate(torch.tensor([[2.6]], dtype=torch.float64))  # probed at step 1
    assert not bool(fresh[0]) and case.sut_evals == 3 and case.sut.images_seen == seen
    assert int(outputs.argmax()) == 0


def test_the_origin_is_the_shared_ldm_origin_and_the_guidance_is_restored():
    generator = tiny_generator(num_inference_steps=2)
    hynea = HyNeACase(generator, tiny_sut(), origin_class=3, seed=5)
    hynea.setup("fit")
    case = CFGFirstFlipCase(generator, tiny_sut(), origin_class=3, seed=5)
    case.setup("fit")
    assert torch.equal(case.origin_image, hynea.origin_image)
    assert torch.equal(case.noise, generator.initial_noise(5))
    at_origin, unguided = case.render(torch.tensor([[3.0], [1.0]], dtype=torch.float64)).split(1)
    torch.testing.assert_close(at_origin, case.origin_image, atol=1e-6, rtol=0)
    assert (unguided - case.origin_image).abs().max() > 1e-3  # the scale changes a real LDM's image
    assert generator.guidance_scale == 3.0
    with pytest.raises(RuntimeError), guidance(generator, 1.4):
        raise RuntimeError("a failing render")
    assert generator.guidance_scale == 3.0


# ---------------------------------------------------------------------- through the campaign
def fit_args(root: Path, *extra: str) -> list[str]:
    """The shipped config pointed at the tiny zoo: classes 1 and 7, one case each."""
    return ["fit", "--config", "configs/mnist_cfg_firstflip.yaml",
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--cases.classes", "[1, 7]", "--cases.n_per_class", "1",
            "--cases.validate_origins", "false",  # the tiny zoo's random digits are not recognisable
            "--output.root", str(root), *extra]


@pytest.mark.slow
def test_the_config_fits_on_the_tiny_zoo_with_shared_records(tiny_zoo, tmp_path, capsys):
    from hynea_pl.cli import main
    from hynea_pl.generators import ClassConditionalLDM
    from hynea_pl.images import load_image
    from hynea_pl.report.compare import origin_groups
    from hynea_pl.schema import read_records

    assert main(fit_args(tmp_path)) == 0
    run_dir = tmp_path / "mnist_cfg-first-flip"
    records = read_records(run_dir / "records.jsonl")
    assert [r.method for r in records] == ["cfg-first-flip"] * 2
    generator = ClassConditionalLDM("zoo://tiny/ldm", num_inference_steps=2)
    for record in records:
        info = record.diagnostics
        assert record.error is None and record.verdict is not None
        assert set(info) == {"mode", "schedule", "guidance_star", "probes", "stop_reason"}
        assert info["schedule"] == list(LINEAR)
        assert record.sut_evals == info["probes"] == record.steps <= 5
        if record.flipped:
            assert info["guidance_star"] == LINEAR[info["probes"]] and record.result_step == info["probes"]
        else:
            assert info["guidance_star"] is None and info["probes"] == 5
        origin = generator.sample(generator.initial_noise(record.seed), record.origin_class)[0]
        assert (load_image(run_dir / record.origin_image) - origin).abs().max() <= 1 / 255 + 1e-6
    # compare reads the run's generator from its config.yaml: the LDM runs' shared origins
    assert origin_groups([run_dir]) == [("ClassConditionalLDM(zoo://tiny/ldm)", [str(run_dir)])]
    capsys.readouterr()
    assert main(fit_args(tmp_path, "--model.init_args.schedule", "[3.0, 3.5]")) == 2
    (error,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "a guidance schedule starts at the generator's guidance_scale 3.0" in error and error.endswith("3.5]")
