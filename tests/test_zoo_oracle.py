"""The zoo's validity oracle: the steering member and three judges of two other families (their "not a digit"
output), their augmentation, loading API and gates."""

from __future__ import annotations

import json

import pytest
import torch

from hynea_pl.zoo.augment import (
    affine, dilate, elastic, erode, random_affine, random_elastic, random_noise, random_stroke,
)
from hynea_pl.zoo.cache import is_complete
from hynea_pl.zoo.labelled.config import OracleConfig
from hynea_pl.zoo.labelled.oracle import ORACLE_NAMES, ORACLE_ROLES, OracleClassifier, OracleNet, augment
from hynea_pl.zoo.labelled.zoo import COMPONENTS, Zoo
from hynea_pl.zoo.profiles import get_profile


def line_image() -> torch.Tensor:
    """``(2, 1, 32, 32)``: a one-pixel vertical line, and a small square of grey levels."""
    images = torch.zeros(2, 1, 32, 32)
    images[0, 0, 8:24, 15] = 1.0
    images[1, 0, 12:18, 12:18] = torch.linspace(0.2, 1.0, 36).view(6, 6)
    return images


def test_members_are_components_with_distinct_hashes_and_seeds(tiny_zoo):
    assert set(ORACLE_NAMES) <= set(COMPONENTS)
    assert Zoo.oracle_names() == {"steering": ["steer-cnn"],
                                  "judges": ["oracle-1", "oracle-2", "judge-convmixer"]}
    entries = [tiny_zoo.entries[name] for name in ORACLE_NAMES]
    assert len({entry.name for entry in entries}) == 4, "each member has its own config hash"
    seeds, classes = set(), {}
    for name, entry in zip(ORACLE_NAMES, entries):
        assert is_complete(entry) and entry.name.startswith(f"{name}-")
        config = json.loads((entry / "config.json").read_text())
        classes[name] = config["class_path"]
        assert config["preprocess"] == {"size": 32, "channels": 1, "mean": [0.5], "std": [0.5]}
        assert config["role"] == name
        assert (entry / "model.safetensors").is_file()
        assert json.loads((entry / "build.json").read_text())["build_s"] > 0
        seeds.add(config["training"]["seed"])
        # a judge reads like people: one output more than the digits, its "not a digit" answer
        judge = name in ORACLE_ROLES["judges"]
        assert ("not_digit_share" in config["training"]) == judge, name
        assert config["init_args"]["num_classes"] == (11 if judge else 10), name
    assert classes == {"steer-cnn": "hynea_pl.zoo.labelled.classifier.SmallCNN",
                       "oracle-1": "hynea_pl.zoo.labelled.oracle.OracleNet",
                       "oracle-2": "hynea_pl.zoo.labelled.oracle.OracleNet",
                       "judge-convmixer": "timm.models.convmixer.ConvMixer"}
    sut_seed = json.loads((tiny_zoo.entries["sut"] / "config.json").read_text())["training"]["seed"]
    trained = [json.loads((tiny_zoo.entries[n] / "config.json").read_text())["training"]["seed"]
               for n in ORACLE_NAMES]
    assert len(set(trained)) == 4 and sut_seed not in trained


def test_judges_share_no_family_with_the_steering_member_or_the_sut(tiny_zoo):
    from hynea_pl.suts import ClassifierSUT
    from hynea_pl.suts.family import model_families
    from hynea_pl.zoo.labelled.oracle_sut import ZooOracle

    judges, steering = ZooOracle("tiny", "judges"), ZooOracle("tiny", "steering")
    assert model_families(judges) == {"resnet", "convmixer"}
    assert model_families(steering) == {"cnn"}
    assert not model_families(judges) & model_families(ClassifierSUT(tiny_zoo.sut()))
    assert ZooOracle("tiny", "judges", members=["oracle-1"]).member_names == ["oracle-1"]
    with pytest.raises(ValueError, match="not judges members"):
        ZooOracle("tiny", "judges", members=["steer-cnn"])


def test_oracle_is_frozen_and_gives_logits_on_raw_images(tiny_zoo):
    images = torch.rand(5, 1, 32, 32)
    for name in ORACLE_NAMES:
        oracle = tiny_zoo.oracle(name)
        assert not any(p.requires_grad for p in oracle.parameters())
        logits = oracle(images)
        outputs = 11 if name in ORACLE_ROLES["judges"] else 10  # a judge's last output: "not a digit"
        assert logits.shape == (5, outputs) and torch.isfinite(logits).all()
        assert oracle(images.expand(-1, 3, -1, -1)).shape == (5, outputs), "RGB is averaged to grey"
        assert isinstance(oracle, OracleClassifier) and not oracle.training
        assert oracle.not_a_class == (10 if name in ORACLE_ROLES["judges"] else None), name
        oracle.train()
        assert not oracle.training and not oracle.network.training, "an oracle member stays in eval mode"
        # the normalisation is inside: the raw network on (x - 0.5) / 0.5 gives the same logits
        torch.testing.assert_close(oracle.network((images - 0.5) / 0.5), logits)
    with pytest.raises(ValueError, match="unknown zoo oracle 'oracle-9'"):
        tiny_zoo.oracle("oracle-9")


def test_zoo_uri_resolves_each_member_to_its_state_dict(tiny_zoo):
    from hynea_pl.paths import resolve_path
    from hynea_pl.suts import ClassifierSUT
    from hynea_pl.suts.preprocess import Preprocess
    from hynea_pl.zoo import resolve_zoo_uri

    for name in ORACLE_NAMES:
        target = tiny_zoo.entries[name] / "model.safetensors"
        assert resolve_zoo_uri(f"zoo://tiny/{name}") == target and resolve_path(f"zoo://tiny/{name}") == target
    # as a classifier in YAML: class_path OracleNet + init_args + weights zoo://tiny/oracle-1 + preprocess
    init_args = json.loads((tiny_zoo.entries["oracle-1"] / "config.json").read_text())["init_args"]
    sut = ClassifierSUT(OracleNet(**init_args), weights="zoo://tiny/oracle-1",
                        preprocess=Preprocess(size=32, channels=1, mean=[0.5], std=[0.5]))
    images = torch.rand(3, 1, 32, 32)
    torch.testing.assert_close(sut(images), tiny_zoo.oracle("oracle-1")(images))


def test_gates_of_every_member_are_in_quality_json(tiny_zoo):
    gates = {gate["name"]: gate for gate in tiny_zoo.quality["gates"]}
    for name in ORACLE_NAMES:
        for gate in (f"{name}_accuracy", f"{name}_generated_accuracy"):
            assert 0.0 <= gates[gate]["value"] <= 1.0, gate
    for gate in ("judges_vote_accuracy", "judges_vote_generated_accuracy"):
        assert 0.0 <= gates[gate]["value"] <= 1.0
    assert not [g for g in gates if "unanimous" in g or "knn" in g], "no gate of the removed k-NN or unanimity"
    assert all(gates[g]["threshold"] is None for g in gates), "tiny records its gates, never enforces them"
    full = get_profile("full").gates
    assert full.oracle_accuracy == 0.98 and full.verdict_ceiling == 0.97 and not hasattr(full, "knn_accuracy")
    assert tiny_zoo.quality["gates"][-1]["name"] == "build_time_s"


def test_full_profile_gates_the_members_and_records_the_rest(monkeypatch):
    from hynea_pl.suts import ClassifierSUT, EnsembleClassifierSUT
    from hynea_pl.zoo.labelled.gates import measure_oracle_gates
    from hynea_pl.zoo.splits import ImageSplit

    images, labels = torch.rand(20, 1, 32, 32), torch.arange(10).repeat(2)
    data = ImageSplit(images, labels, images, labels)

    class Fixed(torch.nn.Module):
        """Right on the first ``right`` images, (y + 1) % 10 on the others, with logit margin ``confidence``."""

        def __init__(self, right: int, confidence: float = 5.0) -> None:
            super().__init__()
            self.right, self.confidence = right, confidence

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            predicted = torch.cat([labels[: self.right], (labels[self.right :] + 1) % 10])[: len(x)]
            return torch.nn.functional.one_hot(predicted, 10).float() * self.confidence

    oracles = {"steer-cnn": Fixed(20), "oracle-1": Fixed(19, 5.0), "oracle-2": Fixed(10, 2.0)}

    def measured(threshold: float | None) -> dict:
        panel = EnsembleClassifierSUT([ClassifierSUT(oracles[n]) for n in ("oracle-1", "oracle-2")],
                                      ["oracle-1", "oracle-2"], threshold=threshold)
        return {g.name: g for g in measure_oracle_gates(get_profile("full").gates, oracles, panel,
                                                        (images, labels), data)}

    gates = measured(None)
    assert gates["steer-cnn_accuracy"].value == 1.0 and gates["steer-cnn_accuracy"].passed
    assert gates["oracle-1_accuracy"].value == 0.95 and not gates["oracle-1_accuracy"].passed
    assert gates["oracle-1_accuracy"].fatal and gates["oracle-1_accuracy"].threshold == 0.98
    assert gates["oracle-2_generated_accuracy"].threshold is None and gates["oracle-2_generated_accuracy"].passed
    assert gates["steer-cnn_generated_accuracy"].value == 1.0
    assert not [name for name in gates if "unanimous" in name]
    # unanimity (no threshold): both judges right only on the first 10 (however confident oracle-1 is)
    vote = gates["judges_vote_accuracy"]
    assert vote.threshold is None and vote.value == 10 / 20
    assert gates["judges_vote_generated_accuracy"].value == 10 / 20
    # a vote at 0.5 follows the confident judge where the other errs (mean probability of the class ~0.502); at 0.55
    # no class reaches it there: undecided, not right
    assert measured(0.5)["judges_vote_accuracy"].value == 19 / 20
    assert measured(0.5)["judges_vote_generated_accuracy"].value == 19 / 20
    assert measured(0.55)["judges_vote_accuracy"].value == 10 / 20


def test_dilation_thickens_and_erosion_thins_a_line():
    images = line_image()
    thick, thin = dilate(images), erode(images)
    assert thick.shape == thin.shape == images.shape
    assert (thick[0] > 0).sum() == 17 * 2 > (images[0] > 0).sum() == 16
    assert (thin[0] > 0).sum() == 0, "a one-pixel line vanishes under a 2x2 erosion"
    torch.testing.assert_close(erode(dilate(images)), images, msg="a closing gives the line back")
    assert (dilate(images, 3)[0] > 0).sum() == 3 * 18
    for out in (thick, thin, dilate(images, 3), erode(images, 3)):
        assert out.min() >= 0 and out.max() <= 1


def test_zero_warps_are_the_identity():
    images = line_image()
    identity = affine(images, torch.zeros(2), torch.ones(2), torch.zeros(2, 2))
    torch.testing.assert_close(identity, images, atol=1e-6, rtol=0)
    torch.testing.assert_close(elastic(images, torch.randn(2, 2, 4, 4), alpha=0.0), images, atol=1e-6, rtol=0)
    assert random_stroke(images, prob=0.0) is images and random_elastic(images, prob=0.0, alpha=1.0) is images
    assert random_noise(images, prob=0.0, max_std=0.1) is images
    tiny_prob = 1e-9  # no image drawn: the batch passes through unchanged
    unchanged = (random_stroke(images, tiny_prob), random_elastic(images, tiny_prob, 1.5),
                 random_noise(images, tiny_prob, 0.1))
    assert all(torch.equal(out, images) for out in unchanged)


def test_affine_moves_rotates_and_scales_as_documented():
    dot = torch.zeros(1, 1, 32, 32)
    dot[0, 0, 8, 16] = 1.0  # above the centre
    shifted = affine(dot, torch.zeros(1), torch.ones(1), torch.tensor([[3.0, -2.0]]))
    assert shifted[0, 0, 6, 19] == pytest.approx(1.0), "shift (x, y) in pixels"
    turned = affine(dot, torch.tensor([90.0]), torch.ones(1), torch.zeros(1, 2))
    assert turned[0, 0].argmax() == 15 * 32 + 8, "90 degrees counter-clockwise: from above the centre to its left"
    line = line_image()[:1]
    assert (affine(line, torch.zeros(1), torch.tensor([1.5]), torch.zeros(1, 2)) > 0.5).sum() > 16


def test_random_augmentations_keep_shape_and_range_and_follow_the_generator():
    images = line_image().repeat(8, 1, 1, 1)
    cfg = OracleConfig()
    for out in (
        random_affine(images, 2.0, 15.0, 0.1, torch.Generator().manual_seed(0)),
        random_stroke(images, 1.0, 2, torch.Generator().manual_seed(0)),
        random_elastic(images, 1.0, 1.5, 4, torch.Generator().manual_seed(0)),
        random_noise(images, 1.0, 0.1, torch.Generator().manual_seed(0)),
        augment(images, cfg, torch.Generator().manual_seed(0)),
    ):
        assert out.shape == images.shape and out.min() >= 0 and out.max() <= 1
        assert not torch.equal(out, images)
    first = augment(images, cfg, torch.Generator().manual_seed(3))
    torch.testing.assert_close(first, augment(images, cfg, torch.Generator().manual_seed(3)))
    strokes = random_stroke(images, 1.0, 2, torch.Generator().manual_seed(1))
    counts = (strokes[::2] > 0).flatten(1).sum(1)  # the line images: dilated (> 16 pixels) or eroded (0)
    assert set(counts.tolist()) <= {0, 34} and len(set(counts.tolist())) == 2


def test_oracle_net_differs_from_the_sut_architecture():
    net = OracleNet()
    assert net(torch.randn(4, 1, 32, 32)).shape == (4, 10)
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())
    assert any(isinstance(m, torch.nn.AdaptiveAvgPool2d) for m in net.modules())
    assert OracleNet((8, 16, 16))(torch.randn(2, 1, 32, 32)).shape == (2, 10)


def test_each_member_has_its_own_cache_key():
    from dataclasses import replace

    from hynea_pl.zoo.labelled.zoo import entry_paths

    tiny = get_profile("tiny")
    entries, manifest = entry_paths(tiny)
    reseeded = replace(tiny, oracles={**tiny.oracles, "oracle-1": replace(tiny.oracles["oracle-1"], seed=99)})
    changed, changed_manifest = entry_paths(reseeded)
    assert changed["oracle-1"] != entries["oracle-1"] and changed_manifest != manifest
    assert all(changed[n] == entries[n] for n in COMPONENTS if n != "oracle-1")
    # what a judge learns to read through (and to refuse) is its training config: its key only
    shy = replace(tiny, oracles={**tiny.oracles, "judge-convmixer": replace(tiny.oracles["judge-convmixer"],
                                                                            not_digit_share=0.3)})
    assert entry_paths(shy)[0]["judge-convmixer"] != entries["judge-convmixer"]
    assert all(entry_paths(shy)[0][n] == entries[n] for n in COMPONENTS if n != "judge-convmixer")
    # the judges' vote trains nothing: the same entries, another gated manifest
    from hynea_pl.zoo.labelled.config import VoteConfig

    revoted, revoted_manifest = entry_paths(replace(tiny, vote=VoteConfig(threshold=0.7)))
    assert revoted == entries and revoted_manifest != manifest
    full = get_profile("full")
    trained = {name: cfg.seed for name, cfg in full.oracles.items()}
    assert len(trained) == 4 and len(set(trained.values()) | {full.sut.seed}) == 5
    with pytest.raises(ValueError, match="expected steer-cnn, oracle-1"):
        entry_paths(replace(tiny, oracles={"oracle-1": tiny.oracles["oracle-1"]}))
