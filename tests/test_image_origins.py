"""Cases that start from real images (``cases.images``): DDIM inversion round-trips, the zoo's held-out digits and a
folder of the user's images as the test set, the records they write (source, real image, inversion quality, the
noise replay starts from), and bad input (an unreadable file, a colour JPEG, a large image, an unknown label)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from diffusers import EulerDiscreteScheduler
from method_runs import records
from PIL import Image
from tiny_components import DIGIT_CENTROIDS, tiny_generator

from hynea_pl.campaign.case_types import CaseSelection
from hynea_pl.campaign.records import TEST_IMAGES_FILE
from hynea_pl.cli import main
from hynea_pl.campaign.test_images import read_test_images
from hynea_pl.generators.inversion import DDIMInversion, check_invertible
from hynea_pl.images import load_image
from hynea_pl.schema import read_records


def _relative_error(generator, images, labels, inversion: DDIMInversion) -> torch.Tensor:
    return inversion(generator, images, labels).latent_error


def _zoo_generator(steps: int = 6):
    from hynea_pl.generators import ClassConditionalLDM

    return ClassConditionalLDM("zoo://tiny/ldm", num_inference_steps=steps, guidance_scale=3.0)


def test_inversion_round_trip_reconstructs_real_digits_and_fixed_point_steps_help(tiny_zoo):
    """Held-out real digits invert to noise whose sample is close to them (the tiny zoo's trained LDM, guided as the
    demo); fixed-point steps bring the sampled latent closer to the image's latent than plain inversion."""
    from hynea_pl.metrics import ms_ssim

    generator = _zoo_generator()
    test = read_test_images("zoo://tiny/held_out", (32, 32), 1)
    images, labels = test.images[:4], torch.tensor([label for (label,) in test.labels[:4]])
    plain = _relative_error(generator, images, labels, DDIMInversion(fixed_point_iterations=0))
    fixed = DDIMInversion(fixed_point_iterations=3)(generator, images, labels)
    assert torch.isfinite(plain).all() and float(fixed.latent_error.mean()) < float(plain.mean()), (plain, fixed)
    assert fixed.noise.shape == (4, *generator.latent_shape) and fixed.seconds > 0
    # the reconstruction is the generator's own sample of the returned noise, and it is close to the real digit
    torch.testing.assert_close(generator.sample(fixed.noise, labels), fixed.reconstruction, atol=1e-4, rtol=0)
    autoencoded = generator.decode(generator.encode(images))
    for i in range(4):  # as close as the autoencoder alone allows, within a margin
        assert float(ms_ssim(fixed.reconstruction[i:i + 1], images[i:i + 1])) > \
            float(ms_ssim(autoencoded[i:i + 1], images[i:i + 1])) - 0.1


def test_refinement_lowers_the_latent_error(tiny_zoo):
    generator = _zoo_generator(steps=3)
    test = read_test_images("zoo://tiny/held_out", (32, 32), 1)
    images, labels = test.images[:2], torch.tensor([label for (label,) in test.labels[:2]])
    before = _relative_error(generator, images, labels, DDIMInversion(fixed_point_iterations=0))
    after = _relative_error(generator, images, labels, DDIMInversion(fixed_point_iterations=0, refine_steps=20,
                                                                      refine_lr=0.05))
    assert float(after.mean()) < float(before.mean()), (before, after)


def test_what_cannot_be_inverted_is_one_line():
    generator = tiny_generator()
    generator.eta = 0.5
    with pytest.raises(ValueError, match="deterministic sampling") as error:
        check_invertible(generator)
    assert "\n" not in str(error.value)
    generator = tiny_generator()
    generator.scheduler = EulerDiscreteScheduler()
    with pytest.raises(TypeError, match="DDIMScheduler"):
        check_invertible(generator)
    with pytest.raises(ValueError, match="integer >= 0"):
        DDIMInversion(fixed_point_iterations=-1)
    with pytest.raises(ValueError, match="cases.inversion takes"):
        CaseSelection(inversion={"iterations": 3})
    with pytest.raises(ValueError, match="labels_csv goes with cases.images"):
        CaseSelection(labels_csv="labels.csv")


def test_zoo_held_out_source(tiny_zoo):
    test = read_test_images("zoo://tiny/held_out?start=150", (32, 32), 1)
    assert test.images.shape == (50, 1, 32, 32) and len(test.labels) == 50
    assert test.sources[0] == "held_out/150" and all(len(label) == 1 for label in test.labels)
    assert not test.skipped and not test.converted
    rgb = read_test_images("zoo://tiny/held_out?start=190", (16, 16), 3)
    assert rgb.images.shape == (10, 3, 16, 16) and rgb.converted == {"channels": 10, "resized": 10}
    for bad, message in (("zoo://tiny/faces", "unknown zoo image set"), ("zoo://tiny/held_out?start=999", "start"),
                         ("zoo://tiny/held_out?stop=3", "unknown option")):
        with pytest.raises(ValueError, match=message):
            read_test_images(bad, (32, 32), 1)


def real_fit_args(root: Path, images: str, *extra: str, classes: tuple[int, ...] = (1, 7)) -> list[str]:
    """configs/mnist_real.yaml on the tiny zoo: HyNeA from real images, one case per class of ``classes``."""
    return [
        "fit", "--config", "configs/mnist_real.yaml",
        "--generator.init_args.pretrained", "zoo://tiny/ldm", "--generator.init_args.num_inference_steps", "2",
        "--sut.init_args.weights", "zoo://tiny/sut", "--sut.init_args.model.init_args.channels", "[8, 16]",
        "--sut.init_args.model.init_args.hidden", "32", "--oracle.init_args.profile", "tiny",
        "--realism.init_args.profile", "tiny", "--realism.init_args.reference_size", "100",
        "--model.init_args.steering.model.init_args.profile", "tiny", "--model.init_args.acceptance.test.init_args.profile", "tiny",
        "--cases.images", images, "--cases.inversion", '{"fixed_point_iterations": 2}',
        "--cases.classes", json.dumps(list(classes)), "--cases.n_per_class", "1",
        "--cases.validate_origins", "false", "--trainer.max_steps", "2", "--budget.max_evals", "10",
        "--output.root", str(root), *extra,
    ]


@pytest.mark.slow
def test_campaign_from_held_out_digits_records_its_real_origins_and_replays(tiny_zoo, tmp_path):
    flips = ("--model.init_args.save_adapters", "true", "--model.init_args.steering.model", "null",
             "--model.init_args.acceptance.test", "null", "--model.init_args.retries.attempts", "1",  # the paper's HyNeA
             "--model.init_args.search.stop_on", "flip", "--model.init_args.acceptance.margin_ratio", "0", "--model.init_args.search.lr_max",
             "0.1", "--trainer.max_steps", "20", "--budget.max_evals", "20",
             *DIGIT_CENTROIDS)  # a SUT every pixel moves: the cases flip
    assert main(real_fit_args(tmp_path, "zoo://tiny/held_out?start=100", *flips)) == 0
    run = tmp_path / "mnist_real_hynea"
    labels = read_test_images("zoo://tiny/held_out?start=100", (32, 32), 1).labels
    for record in read_records(run / "records.jsonl"):
        assert record.error is None, record.error
        index = int(record.origin_source.removeprefix("held_out/"))
        assert index >= 100 and labels[index - 100] == (record.origin_class,)  # the first digit of its class
        assert not record.skipped_seeds
        real = load_image(run / record.real_image)  # saved as the run's other PNGs: grey in 3 equal channels
        held_out = read_test_images(f"zoo://tiny/{record.origin_source.replace('/', '?start=')}", (32, 32), 1)
        torch.testing.assert_close(real[:1], held_out.images[0], atol=0.6 / 255, rtol=0)  # the digit, 8-bit
        assert 0 <= record.inversion_error and -1 <= record.inversion_ms_ssim <= 1
        assert record.real_ms_ssim is not None and math.isfinite(record.real_ms_ssim)
        assert (run / record.origin_noise).is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["skipped_files"] == 0 and summary["median_ms_ssim_to_real"] is not None
    from hynea_pl.report.grid import case_grid  # the grid shows the real image above origin / result / difference

    cases = read_records(run / "records.jsonl")
    with_real = case_grid(run, cases)
    without = case_grid(run, [r.model_copy(update={"real_image": None}) for r in cases])
    assert with_real.height > without.height and with_real.width >= without.width
    flipped = [r for r in read_records(run / "records.jsonl") if r.adapter]
    assert flipped, "a case flipped and saved its adapter"
    # replay starts from the saved noise, not the seed's, and gives the stored result back
    assert main(["replay", str(run), flipped[0].case_id]) == 0
    # batched, the same cases start from the same noise and end the same way
    assert main(real_fit_args(tmp_path, "zoo://tiny/held_out?start=100", *flips, "--cases.batch_size", "2",
                              "--output.name", "batched")) == 0
    single, batched = ({r["case_id"]: r for r in records(tmp_path / name)} for name in ("mnist_real_hynea", "batched"))
    assert sorted(single) == sorted(batched)
    for cid, one in single.items():
        for key in ("origin_source", "flipped", "result_step", "sut_evals", "inversion_error"):
            assert batched[cid][key] == one[key], (cid, key)


def _write(path: Path, array: np.ndarray, mode: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode).save(path)


def _digit_folder(root: Path, tiny_zoo) -> Path:
    """``root/<class>/*.png`` from the tiny zoo's held-out digits of classes 1 and 7, plus the issue's bad input:
    a corrupt PNG, a colour JPEG, a 100 x 100 image."""
    test = read_test_images("zoo://tiny/held_out", (32, 32), 1)
    for i, (image, (label,)) in enumerate(zip(test.images, test.labels, strict=True)):
        if label in (1, 7) and i < 60:
            _write(root / str(label) / f"digit_{i:03d}.png", (image[0].numpy() * 255).astype(np.uint8))
    (root / "1" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    seven = next(image for image, (label,) in zip(test.images, test.labels, strict=True) if label == 7)
    gray = (seven[0].numpy() * 255).astype(np.uint8)
    _write(root / "7" / "a_colour.jpg", np.stack([gray, gray, gray], -1), "RGB")
    large = np.asarray(Image.fromarray(gray).resize((100, 100), Image.BILINEAR))
    _write(root / "1" / "a_large.png", large)
    return root


@pytest.mark.slow
def test_a_folder_with_bad_files_runs_and_counts_them(tiny_zoo, tmp_path, capsys):
    folder = _digit_folder(tmp_path / "images", tiny_zoo)
    with pytest.warns(UserWarning, match="broken.png"):
        assert main(real_fit_args(tmp_path, str(folder), "--output.name", "folder")) == 0
    run = tmp_path / "folder"
    read = json.loads((run / TEST_IMAGES_FILE).read_text())
    assert read["skipped"] == {"unreadable": 1} and read["converted"] == {"channels": 1, "resized": 1}
    assert json.loads((run / "summary.json").read_text())["skipped_files"] == 1
    found = {r["case_id"]: r for r in records(run)}
    assert sorted(found) == ["c1-0", "c7-0"] and not any(r["error"] for r in found.values())
    # the converted files are used first (sorted by name): the large 1 resized, the colour 7 made grey
    assert found["c1-0"]["origin_source"] == "1/a_large.png" and found["c7-0"]["origin_source"] == "7/a_colour.jpg"
    assert "1 unreadable" in capsys.readouterr().out

    (folder / "cat").mkdir()
    _write(folder / "cat" / "tabby.png", np.zeros((32, 32), np.uint8))
    assert main(real_fit_args(tmp_path, str(folder), "--output.name", "with_cat")) != 0
    err = capsys.readouterr().err
    assert "unknown label 'cat'" in err and "Traceback" not in err
    assert not (tmp_path / "with_cat" / "records.jsonl").exists()  # refused before any case ran
    assert len(records(run)) == 2  # the earlier run is untouched


class _InkReader(torch.nn.Module):
    """Reads class 1 when an image has ink (mean above 0.05), else class 0."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        ink = (images.flatten(1).mean(1) > 0.05).float()
        return torch.stack([1 - ink, ink], 1) * 10


def test_images_the_sut_misreads_are_passed_over_and_counted():
    """An image the SUT does not read as its class is not an origin (paper 4.5): the next image of the class is
    tried, counted in ``skipped_seeds``; a case whose images all fail has no origin."""
    from hynea_pl.campaign.cases import iter_cases
    from hynea_pl.data import LabelledImages
    from hynea_pl.suts import ClassifierSUT

    generator = tiny_generator(num_inference_steps=2, guidance_scale=1.0)
    sut = ClassifierSUT(_InkReader())
    blank, inked = torch.zeros(1, 1, 32, 32), torch.zeros(1, 1, 32, 32)
    inked[..., 8:24, 14:18] = 1.0
    images = LabelledImages(images=torch.cat([blank, blank, inked, blank]), labels=[(1,), (1,), (1,), (0,)],
                            sources=["1/a.png", "1/b.png", "1/c.png", "0/d.png"], skipped={}, converted={})
    sut_real = sut(images.images).argmax(1).tolist()
    assert sut_real == [0, 0, 1, 0]
    selection = CaseSelection(classes=[1], n_per_class=2, images="unused", max_seed_tries=3)
    first, second = iter_cases(selection, generator, sut, images)
    # the random generator's reconstructions are grey all over (mean ~0.5): the reader sees ink in them
    assert first.source == "1/c.png" and first.skipped_seeds == 2 and first.seed is not None
    assert first.noise is not None and torch.equal(first.real, inked)
    assert second.seed is None and second.source is None  # no image of class 1 left


def test_a_missing_image_folder_is_one_line_before_any_run_folder(tiny_zoo, tmp_path, capsys):
    assert main(real_fit_args(tmp_path, str(tmp_path / "no_such_folder"), "--output.name", "missing")) == 2
    err = capsys.readouterr().err
    assert "cases.images" in err and "no such folder" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "missing").exists()
