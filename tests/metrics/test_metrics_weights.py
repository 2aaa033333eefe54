"""Pretrained-weight handling: LPIPS / FID / ResNet report UNAVAILABLE when weights are missing (never a number
from random weights), load from a local path or the torch hub cache, and never touch the network."""

import math
import warnings

import pytest
import torch

from hynea_pl.metrics import (
    LPIPS,
    FrechetInceptionDistance,
    LPIPSDistance,
    MetricUnavailable,
    PairwiseLPIPSDiversity,
    ResNetEmbedder,
    frechet_distance,
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
    with pytest.raises(MetricUnavailable):
        PairwiseLPIPSDiversity()


def test_fid_and_resnet_unavailable_without_weights(empty_torch_home):
    with pytest.raises(MetricUnavailable, match="inception_v3"):
        FrechetInceptionDistance()
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
    assert metric.compute().item() == pytest.approx(0.0, abs=1e-6)
    metric.update(y[:1], x[:1])  # batch of one
    assert metric.compute().item() > 0
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


# ---------------------------------------------------------------- FID with a configurable feature extractor
class Identity1D(torch.nn.Module):
    num_features = 1

    def forward(self, x):
        return x.flatten(1)[:, :1]


def test_fid_hand_value_one_feature():
    fid = FrechetInceptionDistance(feature=Identity1D())
    with warnings.catch_warnings():  # torchmetrics warns about compute() before update()
        warnings.simplefilter("ignore")
        assert math.isnan(fid.compute().item())
    real = torch.tensor([0.0, 1.0, 2.0, 3.0]).view(4, 1, 1, 1)
    fake = torch.tensor([1.0, 1.0, 3.0, 3.0]).view(4, 1, 1, 1)
    fid.update(real[:2], real=True)
    fid.update(real[2:], real=True)
    fid.update(fake, real=False)
    # 1-D: (mu_r - mu_f)^2 + (sqrt(var_r) - sqrt(var_f))^2, unbiased variances 5/3 and 4/3
    expected = (1.5 - 2.0) ** 2 + (math.sqrt(5 / 3) - math.sqrt(4 / 3)) ** 2
    assert fid.compute().item() == pytest.approx(expected, abs=1e-9)
    # the reference set survives reset() when asked to
    keep = FrechetInceptionDistance(feature=Identity1D(), reset_real_features=False)
    keep.update(real, real=True)
    keep.update(fake, real=False)
    keep.reset()
    keep.update(real, real=False)
    assert keep.compute().item() == pytest.approx(0.0, abs=1e-9)


def test_fid_matches_scipy_on_random_features():
    linalg = pytest.importorskip("scipy.linalg")
    g = torch.Generator().manual_seed(0)
    a = torch.randn(50, 3, generator=g, dtype=torch.float64)
    b = torch.randn(40, 3, generator=g, dtype=torch.float64) @ torch.tensor([[1.0, 0.5, 0], [0, 1.0, 0], [0, 0, 2.0]],
                                                                           dtype=torch.float64) + 0.3
    fid = FrechetInceptionDistance(feature=lambda x: x, num_features=3)
    fid.update(a, real=True)
    fid.update(b, real=False)
    s1, s2 = torch.cov(a.T).numpy(), torch.cov(b.T).numpy()
    covmean = linalg.sqrtm(s1 @ s2).real
    expected = ((a.mean(0) - b.mean(0)) ** 2).sum().item() + float((s1 + s2 - 2 * covmean).trace())
    assert fid.compute().item() == pytest.approx(expected, rel=1e-6)
    assert frechet_distance(a.mean(0), torch.cov(a.T), a.mean(0), torch.cov(a.T)).item() == pytest.approx(0, abs=1e-6)
    with pytest.raises(ValueError, match="num_features"):
        FrechetInceptionDistance(feature=lambda x: x)


def test_to_record_value_is_json_safe():
    assert to_record_value({"a": torch.tensor(float("nan")), "b": [torch.tensor(1.5), float("inf")]}) == {
        "a": None, "b": [1.5, None]}
