"""Mimicry: the mixed-style formula, pymoo's AGE-MOEA2 driven by ask / tell one generation per step, the exact
budget, the stop at the first flip, and a random NVIDIA-style generator loaded through YAML alone (class_path and a
pickle with its code path) in Mimicry and the truncation probes."""

from __future__ import annotations

import pickle
import sys

import lightning as L
import pytest
import torch
from tiny_stylegan import RANDOM_GENERATOR_SOURCE, CraftedGAN, threshold_sut

from hynea_pl.baselines.mimicry import MimicryCase, mixed_styles
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.generators.stylegan import StyleGANGenerator


def run(case: MimicryCase, budget: int = 2700, max_steps: int = 100) -> L.Trainer:
    trainer = L.Trainer(max_steps=max_steps, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)])
    trainer.fit(case)
    return trainer


def test_mixed_style_formula():
    torch.manual_seed(0)
    w0, wn, w_avg = torch.randn(1, 8, 4), torch.randn(1, 8, 4), torch.randn(1, 4)
    alphas = torch.rand(5, 3)
    layers = [1, 4, 6]
    ws = mixed_styles(alphas, w0, wn, w_avg, layers)
    assert ws.shape == (5, 8, 4)
    for p in range(5):
        for j, layer in enumerate(layers):
            a = alphas[p, j]
            expected = w_avg[0] + a * (wn[0, layer] - w_avg[0]) + (1 - a) * (w0[0, layer] - w_avg[0])
            assert torch.allclose(ws[p, layer], expected, atol=1e-6)
        assert torch.equal(ws[p, [0, 2, 3, 5, 7]], w0[0, [0, 2, 3, 5, 7]])
    assert torch.allclose(mixed_styles(torch.zeros(1, 3), w0, wn, w_avg, layers), w0, atol=1e-6)
    assert torch.allclose(mixed_styles(torch.ones(1, 3), w0, wn, w_avg, layers)[0, layers], wn[0, layers], atol=1e-6)
    with pytest.raises(ValueError, match="alphas must be"):
        mixed_styles(torch.rand(5, 2), w0, wn, w_avg, layers)


def crafted(threshold: float, **kwargs) -> MimicryCase:
    return MimicryCase(StyleGANGenerator(network=CraftedGAN()), threshold_sut(threshold), origin_class=0, seed=1,
                       **kwargs)


def test_age_moea2_is_pymoos_driven_by_ask_and_tell_one_generation_per_step(monkeypatch):
    from pymoo.algorithms.moo.age2 import AGEMOEA2
    from pymoo.operators.sampling.lhs import LHS

    calls: list[str] = []
    real_ask, real_tell = AGEMOEA2.ask, AGEMOEA2.tell
    monkeypatch.setattr(AGEMOEA2, "ask", lambda self: calls.append("ask") or real_ask(self))
    monkeypatch.setattr(AGEMOEA2, "tell", lambda self, *a, **k: calls.append("tell") or real_tell(self, *a, **k))
    case = crafted(-1.0, population_size=10, generations=None)  # never flips
    trainer = run(case, max_steps=3)
    assert type(case.algorithm) is AGEMOEA2 and isinstance(case.algorithm.initialization.sampling, LHS)
    assert case.algorithm.pop_size == 10
    assert calls == ["ask", "tell"] * 3 and trainer.global_step == 3
    history = case.result.history
    assert [h["n_scored"] for h in history] == [10, 10, 10] and case.sut_evals == 30
    objectives = case.algorithm.pop.get("F")
    assert objectives.shape == (10, 2) and (objectives[:, 0] >= 0).all()


def test_first_generation_is_a_latin_hypercube_in_bounds():
    case = crafted(-1.0, population_size=10, generations=None)
    case.setup("fit")
    genomes = torch.as_tensor(case.algorithm.ask().get("X"))
    assert genomes.shape == (10, 8) and genomes.min() >= 0 and genomes.max() <= 1
    for column in genomes.t():
        assert sorted((column * 10).floor().long().tolist()) == list(range(10))


def test_the_budget_is_exact_and_never_overrun():
    case = crafted(-1.0, population_size=10, generations=None)
    trainer = run(case, budget=95)  # 9 generations of 10 fit, a 10th would overrun
    assert case.sut_evals == 90 and trainer.global_step == 9
    capped = crafted(-1.0, population_size=10, generations=2)  # initial population + 2 generations
    assert run(capped).global_step == 3 and capped.sut_evals == 30


def test_stops_at_the_first_flip_and_records_its_diagnostics():
    # grey = 1 - mean(alpha) (all 8 layers mixed toward the all-black rival): class 0 down to 0.5
    case = crafted(0.5, population_size=10)
    trainer = run(case)
    info = case.record_diagnostics()
    assert case.result.found and int(case.result.output.argmax()) == 1 and trainer.global_step == 1
    assert info["rival"] == 1 and info["layers"] == list(range(8)) and info["psi"] == 1.0
    assert sum(info["alphas"]) / 8 > 0.5 - 1e-3 and info["algorithm"] == "pymoo.AGEMOEA2(LHS)"
    assert case.method_name == "mimicry"


def _yaml_args(tmp_path, config: str, name: str, *generator: str) -> list[str]:
    return ["fit", "--config", config, "--generator.init_args.pretrained", "null", *generator,
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--cases.classes", "[1, 7]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--output.root", str(tmp_path), "--output.name", name]


@pytest.mark.slow
def test_a_users_nvidia_style_generator_plugs_in_through_yaml(tiny_zoo, tmp_path, monkeypatch):
    from hynea_pl.cli import main
    from hynea_pl.schema import read_records

    code = tmp_path / "code"
    code.mkdir()
    (code / "my_nvidia_gan.py").write_text(RANDOM_GENERATOR_SOURCE)
    monkeypatch.syspath_prepend(str(code))
    import my_nvidia_gan

    with open(tmp_path / "network-snapshot.pkl", "wb") as f:
        pickle.dump({"G_ema": my_nvidia_gan.TinyGenerator(seed=3)}, f)
    class_path = ["--generator.init_args.network.class_path", "my_nvidia_gan.TinyGenerator",
                  "--generator.init_args.network.init_args.seed", "3"]
    assert main(_yaml_args(tmp_path, "configs/mnist_truncation.yaml", "trunc", *class_path)) == 0
    # the pickle needs only its file and its code directory (nothing of it imported beforehand)
    monkeypatch.delitem(sys.modules, "my_nvidia_gan")
    sys.path.remove(str(code))
    pickled = ["--generator.init_args.network_pkl", str(tmp_path / "network-snapshot.pkl"),
               "--generator.init_args.code_path", f"[{code}]"]
    assert main(_yaml_args(tmp_path, "configs/mnist_mimicry.yaml", "mim", *pickled,
                           "--model.init_args.population_size", "8", "--model.init_args.generations", "1")) == 0
    mimicry = read_records(tmp_path / "mim" / "records.jsonl")
    assert len(mimicry) == 2 and all(r.error is None for r in mimicry), [r.error for r in mimicry]
    assert all(r.sut_evals in (8, 16) and r.verdict is not None and r.diagnostics["rival"] == r.target
               for r in mimicry)
    # the random SUT rarely reads the random digits as their class: the gate may drop them (0 evaluations)
    probes = read_records(tmp_path / "trunc" / "records.jsonl")
    assert len(probes) == 2 and all(r.error is None for r in probes), [r.error for r in probes]
    assert all(r.sut_evals <= 5 and r.verdict is not None and "passed" in r.diagnostics["baseline"] for r in probes)
