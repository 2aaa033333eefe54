"""The built-in profiles on the MNIST digits: ``full`` (the demo, the benchmarks) and ``tiny`` (the tests)."""

from __future__ import annotations

from hynea_pl.zoo.labelled.config import (
    AutoencoderConfig, ClassifierConfig, CNNOracleConfig, ConvMixerJudgeConfig, DenoiserConfig, GateConfig,
    JudgeConfig, SamplerConfig, VoteConfig, ZooProfile,
)
from hynea_pl.zoo.mnist.data import DataConfig
from hynea_pl.zoo.profiles import register_profile_source

FULL = ZooProfile(name="full", data=DataConfig())


TINY = ZooProfile(
    name="tiny",
    data=DataConfig(sut=600, method=600, judges=600, held_out=200),
    sut=ClassifierConfig(channels=(8, 16), hidden=32, max_steps=20, batch_size=64),
    embedder=ClassifierConfig(channels=(8, 8, 16), hidden=16, max_steps=10, batch_size=64, seed=2),
    autoencoder=AutoencoderConfig(block_out_channels=(8, 16, 16), norm_num_groups=8, max_steps=10, batch_size=32),
    denoiser=DenoiserConfig(
        block_out_channels=(32, 32), cross_attention_dim=32, norm_num_groups=8, max_steps=10, batch_size=32
    ),
    sampler=SamplerConfig(num_inference_steps=4),
    gates=GateConfig(
        sut_accuracy=None, oracle_accuracy=None, reconstruction_accuracy=None,
        generated_accuracy=None, verdict_ceiling=None,
        max_build_s=None, generated_per_class=2,
    ),
    oracles={
        "steer-cnn": CNNOracleConfig(channels=(8, 16), hidden=16, max_steps=5, batch_size=32, seed=15),
        "oracle-1": JudgeConfig(widths=(8, 16, 16), max_steps=5, batch_size=32, seed=12),
        "oracle-2": JudgeConfig(widths=(8, 16, 16), max_steps=5, batch_size=32, seed=13),
        "judge-convmixer": ConvMixerJudgeConfig(dim=16, depth=2, max_steps=5, batch_size=32, seed=16),
    },
    vote=VoteConfig(threshold=0.5),
)

PROFILES: dict[str, ZooProfile] = {"full": FULL, "tiny": TINY}

register_profile_source(PROFILES.get, lambda: list(PROFILES))
