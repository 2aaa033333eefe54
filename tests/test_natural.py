"""natural: real images of the case's class in a seeded order until the SUT misreads one. On a folder of flat grey
images (each level used once, so an image is known by its mean) and a SUT that reads class 0 above a grey threshold
(class 1 below): the order, the images read, the count, the result, the budget, the origin's own image and a class
without images; then one campaign on the tiny zoo with verdict fields, after a class missing from the pool is refused
in one line."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from PIL import Image
from tiny_components import DIGIT_CENTROIDS, tiny_generator
from tiny_stylegan import threshold_sut

from hynea_pl.baselines.natural import NaturalCase, draw_order, read_pool
from hynea_pl.callbacks import FlipEarlyStopping, SUTEvaluationBudget
from hynea_pl.suts import ClassifierSUT

#: grey levels (of 255) of the pool's images by class folder; each level once, class 3 has none
LEVELS = {0: [240, 220, 200, 180, 100, 160, 80, 140], 1: [30, 50, 10]}
ORIGIN = 250  # a class-0 origin (flat grey) the SUT reads as class 0


class ReadingSUT(ClassifierSUT):
    """:func:`threshold_sut`'s classifier (class 0 at a grey level >= ``threshold``, else 1) that notes the grey level
    (of 255) of every image it reads, the origin first."""

    def __init__(self, threshold: float) -> None:
        super().__init__(threshold_sut(threshold).model)
        self.levels: list[int] = []

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.levels += (images.mean(dim=(1, 2, 3)) * 255).round().int().tolist()
        return super().forward(images)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("pool")
    for label, levels in LEVELS.items():
        (root / str(label)).mkdir()
        for level in levels:
            Image.fromarray(np.full((32, 32), level, np.uint8)).save(root / str(label) / f"grey_{level:03d}.png")
    return str(root)


@pytest.fixture(scope="module")
def generator():
    return tiny_generator(num_inference_steps=1)


def case(generator, pool: str, threshold: float = 0.5, origin: int = ORIGIN, origin_class: int = 0, seed: int = 1,
         **kwargs) -> NaturalCase:
    module = NaturalCase(generator, ReadingSUT(threshold), origin_class=origin_class, seed=seed, pool=pool, **kwargs)
    module.provide_origin(torch.full((1, 1, 32, 32), origin / 255))
    return module


def run(module: NaturalCase, budget: int = 2700) -> L.Trainer:
    trainer = L.Trainer(max_steps=100, max_epochs=-1, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                        callbacks=[FlipEarlyStopping(), SUTEvaluationBudget(budget)])
    trainer.fit(module)
    return trainer


def order_levels(module: NaturalCase) -> list[int]:
    return [int(source.rsplit("_", 1)[1].removesuffix(".png")) for source in module.sources]


def first_misread(levels: list[int], threshold: float) -> int:
    """1-based position of the first level the threshold SUT reads as class 1."""
    return next(i for i, level in enumerate(levels, 1) if level / 255 < threshold)


# ---------------------------------------------------------------------- the order
def test_the_order_is_a_permutation_of_the_class_drawn_from_the_seed(generator, pool):
    orders = {}
    for seed in (1, 1, 2, 3):
        module = case(generator, pool, seed=seed, origin_tolerance=0.0)
        module.setup("fit")
        orders.setdefault(seed, []).append(order_levels(module))
    assert orders[1][0] == orders[1][1]  # the same seed, the same order
    assert sorted(orders[1][0]) == sorted(LEVELS[0])  # every image of the class once, no other
    assert orders[2][0] != orders[1][0] and orders[3][0] != orders[2][0]  # another seed, another order
    assert LEVELS[0] not in (orders[1][0], orders[2][0], orders[3][0])  # drawn, not the folder's order
    # a CPU generator's permutation: the same on every machine
    assert draw_order(8, 1) == torch.randperm(8, generator=torch.Generator().manual_seed(1)).tolist()


def test_only_images_of_the_case_class_are_read(generator, pool):
    zero = case(generator, pool, threshold=0.01, origin_tolerance=0.0)  # reads everything as class 0: no misread
    trainer = run(zero)
    assert sorted(zero.sut.levels[1:]) == sorted(LEVELS[0]) and zero.sut.levels[0] == ORIGIN
    assert zero.sut_evals == len(LEVELS[0]) == trainer.global_step and zero.stop_reason == "converged"
    one = case(generator, pool, origin=20, origin_class=1, origin_tolerance=0.0)  # reads 1, like its whole pool
    run(one)
    assert sorted(one.sut.levels[1:]) == sorted(LEVELS[1]) and one.sut_evals == len(LEVELS[1])
    assert not one.result.found and one.record_diagnostics()["class_images"] == len(LEVELS[1])


# ---------------------------------------------------------------------- the count and the result
@pytest.mark.parametrize("batch_size", [1, 3])
def test_each_image_is_one_evaluation_and_the_count_stops_at_the_first_misread_image(generator, pool, batch_size):
    module = case(generator, pool, seed=1, batch_size=batch_size, origin_tolerance=0.0)
    trainer = run(module)
    levels = order_levels(module)
    position = first_misread(levels, 0.5)
    assert position >= 3  # seed 1 reads correct images first: the count is not trivially 1
    assert module.sut_evals == position and module.stop_reason == "flipped"
    assert trainer.global_step == math.ceil(position / batch_size)
    read = module.sut.levels[1:]
    if batch_size == 1:
        assert read == levels[:position]  # the SUT read exactly those, in the order
    else:
        assert read[:position] == levels[:position] and len(read) - position < batch_size  # scored, not counted
    result = module.result
    assert result.found and int(result.output.argmax()) == 1 and result.step == trainer.global_step
    # the result is that real image, unchanged
    images = read_pool(pool, (1, 32, 32))
    source = module.sources[position - 1]
    assert torch.equal(result.image.cpu(), images.images[images.sources.index(source)][None])
    assert module.record_diagnostics() == {"pool": pool, "class_images": 8, "excluded_origin": None,
                                           "read": position, "position": position, "result_source": source}


def test_the_budget_stops_a_case_without_misread_and_keeps_the_try_closest_to_a_flip(generator, pool):
    module = case(generator, pool, threshold=0.3, seed=2, origin_tolerance=0.0)  # every class-0 level reads 0
    trainer = run(module, budget=4)
    levels = order_levels(module)
    assert module.sut_evals == 4 == trainer.global_step and module.stop_reason == "budget"
    assert module.sut.levels[1:] == levels[:4]
    closest = min(levels[:4])  # the darkest read: the smallest margin to class 1
    result = module.result
    assert not result.found and round(float(result.image.mean()) * 255) == closest
    assert result.step == levels.index(closest) + 1 == module.record_diagnostics()["position"]
    assert math.isfinite(result.behaviour_loss)


# ---------------------------------------------------------------------- the origin's own image, a missing class
def test_the_pool_image_of_the_origin_is_not_drawn(generator, pool):
    exact = case(generator, pool, threshold=0.01, origin=240, origin_tolerance=0.0)  # the origin is a pool image
    run(exact)
    assert exact.excluded_origin == "0/grey_240.png" and 240 not in exact.sut.levels[1:]
    assert exact.sut_evals == 7 == exact.record_diagnostics()["class_images"]
    near = case(generator, pool, origin=238, origin_tolerance=0.05)  # a reconstruction 2/255 from its image
    near.setup("fit")
    assert near.excluded_origin == "0/grey_240.png" and 240 not in order_levels(near)
    far = case(generator, pool, origin=238, origin_tolerance=0.0)
    far.setup("fit")
    assert far.excluded_origin is None and sorted(order_levels(far)) == sorted(LEVELS[0])


def test_a_class_without_images_in_the_pool_is_one_line(generator, pool, tmp_path):
    module = case(generator, pool, origin_class=3)
    with pytest.raises(ValueError, match=r"^natural: the pool .* has no images of class 3$") as error:
        module.setup("fit")
    assert "\n" not in str(error.value)
    with pytest.raises(FileNotFoundError, match="natural: pool .* no such folder"):
        NaturalCase(generator, ReadingSUT(0.5), pool=str(tmp_path / "missing"))


# ---------------------------------------------------------------------- the comparison row
def test_the_comparison_runs_natural_in_the_real_suite_only():
    import importlib.util
    import sys

    path = Path(__file__).parents[1] / "benchmarks" / "compare_methods.py"
    spec = importlib.util.spec_from_file_location("compare_methods_natural", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    natural = next(m for m in bench.METHODS if m.name == "natural")
    assert natural.suites == ("real",) and natural.what
    command = bench.fit_command(natural, "real", Path("out"), seed=0, n_per_class=3, cap=None)
    assert command[command.index("--config") + 1] == "configs/mnist_natural.yaml"
    assert command[command.index("--cases.images") + 1] == "zoo://full/held_out?start=9000"
    assert command[command.index("--output.name") + 1] == "natural"


# ---------------------------------------------------------------------- through the campaign
@pytest.mark.slow
def test_the_config_records_real_failures_with_verdicts_and_refuses_a_class_missing_from_the_pool(tiny_zoo, tmp_path):
    from hynea_pl.campaign.test_images import read_test_images
    from hynea_pl.cli import main
    from hynea_pl.images import load_image
    from hynea_pl.schema import read_records

    held_out = read_test_images("zoo://tiny/held_out?start=100", (32, 32), 1)
    folder = tmp_path / "pool"  # the tiny zoo's held-out digits 100-199 of class 1 only
    for image, (label,), source in zip(held_out.images, held_out.labels, held_out.sources, strict=True):
        if label == 1:
            (folder / "1").mkdir(parents=True, exist_ok=True)
            Image.fromarray((image[0].numpy() * 255).round().astype(np.uint8)).save(
                folder / "1" / f"{source.replace('/', '_')}.png")
    args = ["fit", "--config", "configs/mnist_natural.yaml",
            "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
            "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
            "--sut.init_args.model.init_args.hidden", "32", *DIGIT_CENTROIDS,
            "--oracle.init_args.profile", "tiny", "--realism.init_args.profile", "tiny",
            "--realism.init_args.reference_size", "100",
            "--cases.images", "zoo://tiny/held_out?start=100", "--cases.inversion", '{"fixed_point_iterations": 2}',
            "--cases.classes", "[1, 7]", "--cases.n_per_class", "1", "--cases.validate_origins", "false",
            "--model.init_args.pool", str(folder), "--output.root", str(tmp_path)]
    run_dir = tmp_path / "mnist_real_natural"
    assert main(args) == 2  # class 7 has no image in the pool: refused before anything runs or is written
    assert not run_dir.exists()
    args[args.index("[1, 7]")] = "[1]"
    assert main(args) == 0
    (one,) = read_records(run_dir / "records.jsonl")
    assert one.case_id == "c1-0" and one.method == "natural"
    assert one.error is None and one.verdict is not None and one.realistic is not None
    info = one.diagnostics
    assert set(info) == {"pool", "class_images", "excluded_origin", "read", "position", "result_source",
                         "stop_reason"}
    assert one.sut_evals == info["read"] <= info["class_images"] <= len([x for x in held_out.labels if x == (1,)])
    assert one.origin_source.startswith("held_out/") and one.accepted == (info["stop_reason"] == "flipped")
    # the saved result is the pool's real image of its source
    real = load_image(folder / "1" / info["result_source"].removeprefix("1/"))
    assert (load_image(run_dir / one.result_image) - real).abs().max() <= 1 / 255 + 1e-6
