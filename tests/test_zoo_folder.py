"""A zoo of the user's own labelled images (``zoo build --data PATH --name NAME``): a tiny profile trained end to end
from a synthetic folder of shapes (grey and RGB), loaded by ``zoo://``, a short HyNeA campaign on it with
``configs/custom.yaml --profile NAME`` (its demo SUT, then a classifier of the user's own), and bad folders and
settings refused in one line before any training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from synthetic_images import write_shapes

from hynea_pl.cli import main
from hynea_pl.zoo import get_profile, load_zoo, resolve_zoo_uri
from hynea_pl.zoo.folder import FolderDataConfig, apply_settings, folder_profile_names
from hynea_pl.zoo.splits import SPLITS, StoredImages, load_splits

#: three shapes at 16 px on the tiny base, with steps enough for the generator to draw them and the SUT and the
#: steering model to read them (the origins must be read as their class)
CLASSES = 3
PER_CLASS = 60
TRAINED = ("--set", "sut.max_steps=150", "--set", "autoencoder.max_steps=150", "--set", "denoiser.max_steps=300",
           "--set", "oracles.steer-cnn.max_steps=100")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("HYNEA_PL_CACHE", str(root))
    return root


def build(data, name: str, *extra: str) -> int:
    return main(["zoo", "build", "--data", str(data), "--name", name, "--base", "tiny", "--size", "16", *extra])


@pytest.mark.slow
@pytest.mark.parametrize("channels", [1, 3])
def test_a_folder_trains_a_profile_that_loads_by_uri_and_runs_a_campaign(channels, cache, tmp_path, capsys):
    data = write_shapes(tmp_path / "shapes", classes=CLASSES, per_class=PER_CLASS, size=20, channels=channels,
                        mixed=True, unreadable=2)
    assert build(data, "shapes", *TRAINED) == 0
    out = capsys.readouterr()
    assert f"of {CLASSES} classes ({channels} x 16 x 16" in out.err
    assert "unreadable" in out.err and "resized" in out.err, "skipped and converted files are counted"
    assert folder_profile_names() == ["shapes"]
    profile = get_profile("shapes")
    assert isinstance(profile.data, FolderDataConfig)
    assert (profile.data.num_classes, profile.data.channels, profile.data.image_size) == (CLASSES, channels, 16)
    splits = load_splits(profile.data)
    for name in SPLITS:  # each split in a random order: a model that takes its first n images sees every class
        assert isinstance(splits[name].train_images, StoredImages), "a folder's splits are read from its store"
        labels = splits[name].train_labels
        assert not torch.equal(labels, labels.sort().values), name
        assert set(labels[:20].tolist()) == set(range(CLASSES)), name
    zoo = load_zoo("shapes")
    names = {gate["name"] for gate in zoo.quality["gates"]}
    assert {"sut_accuracy", "generated_accuracy", "verdict_ceiling", "oracle-1_accuracy",
            "judges_vote_accuracy"} <= names
    assert not [name for name in names if "knn" in name]
    generator = zoo.generator()
    image = generator.sample(generator.initial_noise(3), 1)
    assert image.shape == (1, channels, 16, 16) and torch.isfinite(image).all()
    assert resolve_zoo_uri("zoo://shapes/ldm").is_dir()
    judge = zoo.oracle("judge-convmixer")  # the profile's classes and its "not a shape" answer, the last
    assert judge(image).shape == (1, CLASSES + 1) and judge.not_a_class == CLASSES

    # the campaign config a user starts from, unedited: --profile points it at this profile and its demo SUT
    short = ["--cases.classes", "[0, 1]", "--cases.n_per_class", "1", "--cases.max_seed_tries", "200",
             "--trainer.max_steps", "3", "--budget.max_evals", "4",
             "--generator.init_args.num_inference_steps", "4", "--model.init_args.acceptance.test.init_args.n_images",
             "20", "--output.root", str(tmp_path / "runs")]
    assert main(["fit", "--config", "configs/custom.yaml", "--profile", "shapes", *short]) == 0
    check_records(tmp_path / "runs" / "shapes_hynea" / "records.jsonl")

    # the same with a classifier of the user's own (another network, trained here on the profile's SUT split)
    weights = tmp_path / "my_sut.pt"
    torch.save(train_own_classifier(splits["sut"], channels), weights)
    own = tmp_path / "my_sut.yaml"
    own.write_text(json.dumps({"class_path": "hynea_pl.suts.ClassifierSUT", "init_args": {
        "model": {"class_path": "hynea_pl.zoo.labelled.classifier.SmallCNN",
                  "init_args": {"channels": [6], "hidden": 12, "num_classes": CLASSES, "in_channels": channels,
                                "image_size": 16, "dropout": 0.0}},
        "weights": str(weights), "preprocess": {"size": 16, "channels": channels, "mean": [0.5], "std": [0.5]}}}))
    assert main(["fit", "--config", "configs/custom.yaml", "--profile", "shapes", "--sut", str(own), *short,
                 "--output.name", "shapes_own_{method}"]) == 0
    check_records(tmp_path / "runs" / "shapes_own_hynea" / "records.jsonl")
    saved = (tmp_path / "runs" / "shapes_own_hynea" / "config.yaml").read_text()
    assert "profile: shapes" in saved and str(weights) in saved


def train_own_classifier(split, channels: int) -> dict:
    """A SmallCNN of its own layers, 60 Adam steps on the profile's SUT split: its state dict."""
    from hynea_pl.zoo.labelled.classifier import SmallCNN

    torch.manual_seed(0)
    model = SmallCNN(channels=[6], hidden=12, num_classes=CLASSES, in_channels=channels, image_size=16, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    images, labels = split.train_images.float(), split.train_labels
    for _ in range(60):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model((images - 0.5) / 0.5), labels).backward()
        optimizer.step()
    return model.state_dict()


def check_records(path: Path) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == 2
    ran = [r for r in records if r["error"] is None]  # a weakly trained tiny zoo may find no origin of a class
    assert ran, [r["error"] for r in records]
    assert all(r["error"] == "no valid origin in 200 seeds" for r in records if r["error"])
    assert all(0 < r["sut_evals"] <= 8 and r["verdict"] for r in ran)


@pytest.mark.parametrize("case", ["one class", "too few", "csv names missing", "no images", "multi-label"])
def test_bad_folders_are_one_line_before_training(case, cache, tmp_path, capsys):
    data = tmp_path / "data"
    if case == "one class":
        write_shapes(data, classes=1, per_class=20, size=16)
        expected = "1 class"
    elif case == "too few":
        write_shapes(data, classes=3, per_class=20, size=16)
        for path in sorted((data / "disc").iterdir())[5:]:
            path.unlink()
        expected = "fewer than 12 images"
    elif case == "csv names missing":
        write_shapes(data, classes=3, per_class=20, size=16, csv=True)
        rows = (data / "labels.csv").read_text().splitlines()
        (data / "labels.csv").write_text("\n".join([*rows, "gone-1.png,star", "gone-2.png,star"]) + "\n")
        expected = "star"
    elif case == "no images":
        data.mkdir()
        (data / "a").mkdir()
        expected = "no labelled image"
    else:
        write_shapes(data, classes=3, per_class=20, size=16, csv=True)
        rows = (data / "labels.csv").read_text().splitlines()
        rows[1] = rows[1].rsplit(",", 1)[0] + ",square disc"
        (data / "labels.csv").write_text("\n".join(rows) + "\n")
        expected = "one label per image"
    extra = ("--labels-csv", "labels.csv") if "csv" in case or case == "multi-label" else ()
    assert build(data, "bad", *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "Traceback" not in err[0], err
    assert not (cache / "zoo" / "profiles").exists(), "no profile is saved for a refused folder"


def test_an_accelerator_not_on_this_machine_is_one_line_before_reading(cache, tmp_path, capsys):
    data = write_shapes(tmp_path / "shapes", classes=CLASSES, per_class=PER_CLASS, size=16)
    accelerator = "mps" if torch.cuda.is_available() else "gpu"  # one this machine lacks
    for flag, message in ((accelerator, "not available on this machine"), ("abacus", "choose one of cpu, gpu")):
        assert build(data, "shapes", "--accelerator", flag) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert folder_profile_names() == [] and not (cache / "zoo" / "data").exists(), "nothing was read or trained"


def test_a_bad_name_or_setting_is_one_line(cache, tmp_path, capsys):
    data = write_shapes(tmp_path / "data", classes=2, per_class=14, size=16)
    assert main(["zoo", "build", "--data", str(data), "--name", "full"]) == 2
    assert "built-in profile" in capsys.readouterr().err
    assert main(["zoo", "build", "--data", str(data), "--name", "mine", "--set", "denoiser.max_stepz=3"]) == 2
    assert "max_stepz" in capsys.readouterr().err
    assert main(["zoo", "build", "--data", str(data)]) == 2
    assert "--name" in capsys.readouterr().err
    assert main(["zoo", "build", "--data", str(data), "--name", "mine", "--size", "20"]) == 2
    assert "multiple of 8" in capsys.readouterr().err


def test_a_folder_profile_on_full_trains_its_autoencoder_longer_and_has_the_folder_gates():
    from hynea_pl.zoo.folder import FOLDER_AUTOENCODER_STEPS, FOLDER_GATES, folder_profile_from

    full, tiny = get_profile("full"), get_profile("tiny")
    on_full = folder_profile_from("mine", None, "full", ["sut.max_steps=700"])
    assert on_full.autoencoder.max_steps == FOLDER_AUTOENCODER_STEPS > full.autoencoder.max_steps
    assert on_full.gates == FOLDER_GATES and on_full.sut.max_steps == 700
    assert on_full.denoiser == full.denoiser and on_full.oracles["oracle-1"] == full.oracles["oracle-1"]
    # the template's judges (no pixel k-NN in their place) and their vote, as they are
    assert on_full.oracles == full.oracles and on_full.vote == full.vote
    assert folder_profile_from("mine", None, "full", ["autoencoder.max_steps=300"]).autoencoder.max_steps == 300
    on_tiny = folder_profile_from("mine", None, "tiny")
    assert on_tiny.autoencoder == tiny.autoencoder and on_tiny.gates == tiny.gates
    assert on_tiny.oracles == tiny.oracles and on_tiny.vote == tiny.vote
    # colour images get more latent channels on the full base (4 keep two of the three directions of colour)
    from hynea_pl.zoo.folder import FOLDER_COLOUR_LATENT_CHANNELS

    def data(channels: int) -> FolderDataConfig:
        return FolderDataConfig(fingerprint="0" * 12, image_size=32, channels=channels, num_classes=2,
                                class_names=("a", "b"))

    from hynea_pl.zoo.folder import FOLDER_COLOUR_DENOISER_STEPS

    colour, grey = folder_profile_from("mine", data(3), "full"), folder_profile_from("mine", data(1), "full")
    assert colour.autoencoder.latent_channels == FOLDER_COLOUR_LATENT_CHANNELS
    assert colour.denoiser.max_steps == FOLDER_COLOUR_DENOISER_STEPS > full.denoiser.max_steps
    assert grey.autoencoder.latent_channels == full.autoencoder.latent_channels and grey.denoiser == full.denoiser
    assert folder_profile_from("mine", data(3), "tiny").autoencoder == tiny.autoencoder
    chosen = folder_profile_from("mine", data(3), "full", ["autoencoder.latent_channels=4"])
    assert chosen.autoencoder.latent_channels == 4


def test_settings_change_a_field_and_its_type():
    profile = apply_settings(get_profile("tiny"), ["denoiser.max_steps=7", "gates.verdict_ceiling=0.5",
                                                   "oracles.oracle-1.widths=[4, 8]"])
    assert profile.denoiser.max_steps == 7 and profile.gates.verdict_ceiling == 0.5
    assert profile.oracles["oracle-1"].widths == (4, 8)
    judged = apply_settings(get_profile("tiny"), ["vote.threshold=0.7", "oracles.oracle-2.not_digit_share=0.25"])
    assert judged.vote.threshold == 0.7 and judged.oracles["oracle-2"].not_digit_share == 0.25
    with pytest.raises(ValueError, match="no 'judge-knn'"):  # the k-NN judge is gone
        apply_settings(get_profile("tiny"), ["oracles.judge-knn.k=3"])
    with pytest.raises(ValueError, match="no 'judge-nope'"):
        apply_settings(get_profile("tiny"), ["oracles.judge-nope.k=3"])


@pytest.mark.slow
def test_a_missed_gate_names_its_model_and_what_to_change(cache, tmp_path, capsys):
    data = write_shapes(tmp_path / "data", classes=2, per_class=14, size=16)
    # a SUT of one training step against a gate of 1: missed for sure
    assert build(data, "strict", "--set", "gates.sut_accuracy=1", "--set", "sut.max_steps=1") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "missed its quality gates: sut_accuracy" in err and "< 1 (the demo SUT" in err
    assert "raise sut.max_steps" in err


def test_the_colour_gate_fails_samples_that_lost_their_colours(tmp_path):
    import numpy as np
    from PIL import Image

    from hynea_pl.zoo.folder import FOLDER_GATES
    from hynea_pl.zoo.labelled.gates import colour_fidelity, measure_colour_gates
    from hynea_pl.zoo.splits import ImageSplit

    data = write_shapes(tmp_path / "rgb", classes=4, per_class=60, size=16, channels=3)
    images = torch.stack([torch.from_numpy(np.array(Image.open(path))).permute(2, 0, 1) / 255
                          for path in sorted(data.rglob("*.png"))])
    grey = images.mean(1, keepdim=True).expand_as(images)
    red_is_blue = torch.stack([images[:, 0], images[:, 1], images[:, 0]], 1)  # every hue on one green-magenta line
    assert colour_fidelity(images[::2], images[1::2]) > 0.6  # the same domain's colours (120 images a half)
    assert colour_fidelity(grey, images) < 0.01 and colour_fidelity(red_is_blue, images) < 0.2
    held_out = ImageSplit(images, torch.zeros(len(images), dtype=torch.long), images, torch.zeros(len(images)))
    kept, *lost = (measure_colour_gates(FOLDER_GATES, generated, held_out)[0]
                   for generated in (images[::2], grey, red_is_blue))
    assert kept.passed and not any(gate.passed for gate in lost)
    assert lost[0].threshold == FOLDER_GATES.colour_fidelity
    assert measure_colour_gates(FOLDER_GATES, images[:, :1], held_out) == []  # grey images: no colour gate


@pytest.mark.parametrize("setting", ["denoiser.max_steps=-5", "sut.max_steps=2.5", "sut.dropout=2",
                                     "gates.verdict_ceiling=1.5", "sut.channels=[0, 4]", "gates.max_build_s=0",
                                     "autoencoder.lr=abc"])
def test_a_setting_out_of_range_is_refused_before_anything_is_saved(setting, cache, tmp_path, capsys):
    data = write_shapes(tmp_path / "data", classes=2, per_class=14, size=16)
    assert main(["zoo", "build", "--data", str(data), "--name", "p5g", "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --set {setting.split('=')[0]}=") and "Traceback" not in err[0]
    assert not (cache / "zoo").exists(), "nothing read, saved or trained"


def test_an_argument_error_is_one_line(cache, tmp_path, capsys):
    assert main(["zoo", "build", "--data", str(tmp_path), "--name", "x", "--channels", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--channels" in err[0] and "invalid choice: 2" in err[0]


@pytest.mark.parametrize("stop", [RuntimeError("the trainer broke"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
def test_a_build_stopped_half_way_leaves_no_profile(stop, cache, tmp_path, capsys, monkeypatch):
    from hynea_pl.zoo.labelled import train

    data = write_shapes(tmp_path / "data", classes=2, per_class=14, size=16, unreadable=1)

    def broken(*args, **kwargs):
        raise stop

    monkeypatch.setattr(train, "train_classifier", broken)
    with pytest.warns(UserWarning, match="unreadable") as warned:
        code = build(data, "half")
    err = capsys.readouterr().err
    if isinstance(stop, KeyboardInterrupt):
        assert code == 130
    else:
        lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err
        assert "training half/" in lines[0] and "the trainer broke" in lines[0], lines
    # the package's warning, as the command line shows it: one plain line naming the file and the reader's reason
    from hynea_pl.cli import format_warning

    shown = format_warning(warned[0].message, warned[0].category, warned[0].filename, warned[0].lineno)
    assert shown.count("\n") == 1 and shown.startswith("warning: skipped 1 unreadable image(s)"), shown
    assert "cannot identify image file 'broken_0.png'" in shown, shown  # whichever reader plugins are installed
    assert "folder.py" not in shown and "'it'" not in shown
    assert folder_profile_names() == [] and not (cache / "zoo" / "profiles" / "half.json").exists()
    with pytest.raises(ValueError) as unknown:
        get_profile("half")
    assert "half" not in str(unknown.value).split("choose one of")[1]


def test_a_recipe_of_a_build_that_never_finished_is_no_profile(cache):
    from hynea_pl.zoo.folder import finish_folder_profile, profile_path, save_folder_profile

    data = FolderDataConfig(fingerprint="0" * 12, image_size=16, channels=1, num_classes=2, class_names=("a", "b"))
    save_folder_profile("killed", data, "tiny", [])  # what a build killed before it finished leaves
    assert profile_path("killed").is_file() and folder_profile_names() == []
    with pytest.raises(ValueError, match="unknown zoo profile 'killed'"):
        get_profile("killed")
    finish_folder_profile("killed")
    assert folder_profile_names() == ["killed"] and get_profile("killed").data == data


def test_the_reason_of_an_unreadable_image_is_the_readers_with_the_files_name(tmp_path):
    from hynea_pl.data.image_store import unreadable_reason

    path = tmp_path / "a" / "1.png"
    assert unreadable_reason(OSError(f"cannot identify image file {str(path)!r}"), path) == (
        "cannot identify image file '1.png' (OSError)")
    # a reader plugin that is not installed is not why the file cannot be read
    missing = ModuleNotFoundError("No module named 'pi_heif'")
    assert unreadable_reason(missing, path) == "cannot identify image file '1.png' (UnidentifiedImageError)"
