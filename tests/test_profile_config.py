"""``fit --config configs/custom.yaml --profile NAME``: the profile named once points every zoo component at it, the
profile's classifier and the cases take its shape and classes, a stated value wins, a contradiction is one line."""

from __future__ import annotations

import json

import pytest
import torch

from hynea_pl.campaign.config import parse_config
from hynea_pl.campaign.profile import check_profile_sut, stated_keys
from hynea_pl.zoo import get_profile

CUSTOM = ["--config", "configs/custom.yaml"]


def test_the_profile_points_every_zoo_component_at_it():
    config = parse_config([*CUSTOM, "--profile", "tiny"]).config
    tiny = get_profile("tiny")
    assert config.profile == "tiny"
    assert config.generator.init_args.pretrained == "zoo://tiny/ldm"
    assert config.sut.init_args.weights == "zoo://tiny/sut"
    model = config.sut.init_args.model.init_args
    assert (model.num_classes, model.in_channels, model.image_size) == (10, 1, 32)
    assert (list(model.channels), model.hidden) == (list(tiny.sut.channels), tiny.sut.hidden)
    preprocess = config.sut.init_args.preprocess.init_args
    assert (preprocess.size, preprocess.channels) == (32, 1)
    assert config.oracle.init_args.profile == config.realism.init_args.profile == "tiny"
    assert config.model.init_args.steering.model.init_args.profile == "tiny"
    assert config.model.init_args.acceptance.test.init_args.profile == "tiny"
    assert config.cases.classes == list(range(10))
    assert config.output.name == "tiny_{method}"
    assert "{profile}" not in parse_config([*CUSTOM, "--profile", "tiny"]).dump()


def test_a_stated_value_wins_and_a_contradiction_is_one_line():
    narrowed = parse_config([*CUSTOM, "--profile", "tiny", "--cases.classes", "[0, 3]", "--output.name", "x"]).config
    assert narrowed.cases.classes == [0, 3] and narrowed.output.name == "x"
    with pytest.raises(ValueError, match=r"num_classes = 5: the classifier of profile 'tiny' has 10") as error:
        parse_config([*CUSTOM, "--profile", "tiny", "--sut.init_args.model.init_args.num_classes", "5"])
    assert "\n" not in str(error.value)


def test_the_profile_can_be_named_in_a_file(tmp_path):
    extra = tmp_path / "profile.yaml"
    extra.write_text("profile: tiny\n")
    config = parse_config([*CUSTOM, "--config", str(extra)]).config
    assert config.generator.init_args.pretrained == "zoo://tiny/ldm"


def test_no_profile_and_an_unknown_one_are_one_line():
    with pytest.raises(ValueError, match=r"give --profile NAME"):
        parse_config(CUSTOM)
    with pytest.raises(ValueError, match=r"unknown zoo profile 'nope'; choose one of \['full', 'tiny'"):
        parse_config([*CUSTOM, "--profile", "nope"])


def test_a_sut_of_the_user_keeps_its_own_shape(tmp_path):
    own = tmp_path / "my_sut.yaml"
    own.write_text(json.dumps({"class_path": "hynea_pl.suts.ClassifierSUT", "init_args": {
        "model": {"class_path": "hynea_pl.zoo.labelled.classifier.SmallCNN",
                  "init_args": {"channels": [4], "hidden": 8, "num_classes": 10, "in_channels": 1, "image_size": 28}},
        "weights": "my.pt", "preprocess": {"size": 28, "channels": 1}}}))
    config = parse_config([*CUSTOM, "--profile", "tiny", "--sut", str(own)]).config
    model = config.sut.init_args.model.init_args
    assert (list(model.channels), model.hidden, model.image_size) == ([4], 8, 28)
    assert config.sut.init_args.preprocess.init_args.size == 28


def test_a_sut_of_another_class_count_is_refused():
    class FiveClasses(torch.nn.Linear):
        decision_is_class = True
        num_classes = 5

    with pytest.raises(ValueError, match=r"decides among 5 classes, profile 'tiny' has 10"):
        check_profile_sut("tiny", FiveClasses(2, 5))
    check_profile_sut(None, FiveClasses(2, 5))  # no profile: nothing to compare with


def test_stated_keys_read_files_and_options(tmp_path):
    extra = tmp_path / "c.yaml"
    extra.write_text("cases: {classes: [1]}\nsut:\n  init_args: {preprocess: {size: 8}}\n")
    keys = stated_keys(["--config", str(extra), "--trainer.max_steps", "3", "--sut=my.yaml"])
    assert {"cases.classes", "sut.preprocess.size", "trainer.max_steps", "sut"} <= keys
