"""Every shipped config runs on a fresh machine with nothing trained: each ``zoo://`` model it names (and the base
zoo its verdict reads) is installed from the package's released weights, on an empty cache, offline."""

from __future__ import annotations

import re
from pathlib import Path

from offline_guard import network_blocked

from hynea_pl.campaign.test_images import ZOO_IMAGE_SETS

CONFIGS = sorted(Path("configs").rglob("*.yaml"))
#: ``zoo://<profile>/<name>``; ``{profile}`` is the profile a config is run with (``full`` for the MNIST zoo)
ZOO_URI = re.compile(r"zoo://([\w{}-]+)/(\w+)")
#: the classes that read the base zoo of ``profile: P`` (the verdict's judges, realism and acceptance tests)
BASE_ZOO_READERS = re.compile(r"\b(ZooOracle|ZooTypicality|ZooAcceptance)\b")


def zoo_models(text: str) -> set[tuple[str, str]]:
    """The ``(profile, component)`` pairs a config's text names (its ``zoo://`` image sets left out)."""
    found = {(profile.replace("{profile}", "full"), name) for profile, name in ZOO_URI.findall(text)}
    return {(profile, name) for profile, name in found if name not in ZOO_IMAGE_SETS}


def test_the_configs_name_the_zoo_models_this_test_checks():
    named = {name for config in CONFIGS for _, name in zoo_models(config.read_text())}
    assert {"ldm", "sut", "stylegan", "attribute_sut", "attribute_oracle", "detector_sut", "layout_scenes"} <= named
    assert zoo_models("weights: zoo://{profile}/sut  # and zoo://full/held_out?start=9") == {("full", "sut")}


def test_every_config_resolves_its_zoo_models_from_the_release_on_an_empty_cache(tmp_path, monkeypatch):
    from hynea_pl.zoo import build_zoo, registry

    monkeypatch.setenv("HYNEA_PL_CACHE", str(tmp_path))

    def forbidden(*args, **kwargs):
        raise AssertionError("a config's zoo model was trained or measured instead of installed from the release")

    monkeypatch.setattr(registry, "_timed_entry", forbidden)
    monkeypatch.setattr(registry, "_measure", forbidden)
    resolved = {}
    with network_blocked():
        for config in CONFIGS:
            text = config.read_text()
            for profile, name in sorted(zoo_models(text)):
                resolved[profile, name] = registry.resolve_zoo_uri(f"zoo://{profile}/{name}")
                assert resolved[profile, name].exists(), f"{config}: zoo://{profile}/{name}"
            if BASE_ZOO_READERS.search(text):
                assert build_zoo("full", verbose=False).quality["gates"][0]["passed"], config
    assert ("full", "stylegan") in resolved and ("full", "detector_sut") in resolved

