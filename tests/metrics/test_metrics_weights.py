"""Pretrained-weight handling: LPIPS / Inception / ResNet report UNAVAILABLE when weights are missing (never a number
from random weights), load from a local path or the torch hub cache, and never touch the network."""

import pytest
import torch

from hynea_pl.metrics import (
    LPIPS,
    InceptionFeatures,
    LPIPSDistance,
    MetricUnavailable,
    ResNetEmbedder,
    metric_entry,
    resnet50_embedder,
    unavailable_entry,
)
from hynea_pl.metrics.weights import hub_checkpoint_dir, resolve_checkpoint, to_record_value


@pytest.fixture(autouse=True)
def _offline(offline):
    """Every test here runs with downloads and connections refused."""


def test_lpips_unavailable_without_weights(empty_torch_home):
    assert hub_checkpoint_dir() == empty_torch_home / "hub" / "checkpoints"
    with pytest.raises(MetricUnavailable) as info:
        LPIPS()  # VGG, as the authors
    assert "vgg16-397923af.pth" in info.value.reason and str(empty_torch_home) in info.value.reason
    entry = metric_entry(lambda: LPIPS(net="alex"))
    assert entry["value"] is None and "alexnet" in entry["unavailable"]
    with pytest.raises(MetricUnavailable, match="configured local path"):
        LPIPSDistance("vgg", weights_path=empty_torch_home / "nope.pth")


def test_inception_and_resnet_unavailable_without_weights(empty_torch_home):
    with pytest.raises(MetricUnavailable, match="inception_v3"):
        InceptionFeatures()
    with pytest.raises(MetricUnavailable, match="resnet50"):
        resnet50_embedder()
    assert unavailable_entry(MetricUnavailable("why")) == {"value": None, "unavailable": "why"}


def test_lpips_random_backbone_for_tests_only():
    with pytest.warns(UserWarning, match="tests only"):
        metric = LPIPS(net="squeeze", pnet_rand=True)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 1, 32, 32, generator=g)  # grayscale works (repeated to RGB)
    y = torch.rand(2, 1, 32, 32, generator=g)
    metric.update(x, x)
    assert metric.compute()["mean"] == pytest.approx(0.0, abs=1e-6)
    metric.update(y[:1], x[:1])  # batch of one
    assert metric.compute()["n"] == 3 and metric.compute()["max"] > 0
    d = metric.distance(torch.cat([x, x]).expand(-1, 3, -1, -1), torch.cat([y, x]).expand(-1, 3, -1, -1))
    assert d.shape == (4,) and d[2:].abs().max() < 1e-6


def test_lpips_loads_backbone_from_local_path_and_hub_cache(tmp_path, empty_torch_home):
    torchvision = pytest.importorskip("torchvision")
    state = torchvision.models.squeezenet1_1(weights=None).state_dict()
    path = tmp_path / "squeeze_backbone.pth"
    torch.save(state, path)
    model = LPIPSDistance("squeeze", weights_path=path)
    assert not model.random_backbone and model.weights_path == str(path)
    loaded = model.model.net.state_dict()
    assert torch.equal(loaded["slice1.0.weight"], state["features.0.weight"])
    assert torch.equal(loaded["slice7.12.expand3x3.weight"], state["features.12.expand3x3.weight"])
    # the same file under torchvision's name in the hub cache is found without configuration
    cache = hub_checkpoint_dir()
    cache.mkdir(parents=True)
    (cache / "squeezenet1_1-b8a52dc0.pth").write_bytes(path.read_bytes())
    assert resolve_checkpoint("squeezenet1_1") == cache / "squeezenet1_1-b8a52dc0.pth"
    assert LPIPSDistance("squeeze").weights_path.endswith("squeezenet1_1-b8a52dc0.pth")
    # a file of the wrong architecture is reported, not half-loaded
    wrong = tmp_path / "wrong.pth"
    torch.save({"features.0.weight": torch.zeros(1)}, wrong)
    with pytest.raises(MetricUnavailable):
        LPIPSDistance("squeeze", weights_path=wrong)


def test_resnet_embedder_from_local_path(tmp_path):
    torchvision = pytest.importorskip("torchvision")
    net = torchvision.models.resnet18(weights=None)
    path = tmp_path / "resnet18.pth"
    torch.save({"state_dict": net.state_dict()}, path)  # wrapped state dicts are accepted
    emb = ResNetEmbedder("resnet18", weights_path=path, resize=64)
    out = emb(torch.rand(3, 1, 32, 32))
    assert out.shape == (3, 512)
    assert torch.equal(emb.net.conv1.weight, net.conv1.weight)


def test_to_record_value_is_json_safe():
    assert to_record_value({"a": torch.tensor(float("nan")), "b": [torch.tensor(1.5), float("inf")]}) == {
        "a": None, "b": [1.5, None]}
