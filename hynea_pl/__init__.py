"""hynea_pl: failure-inducing test inputs for vision models by per-test-case HyperNet adaptation of a
latent diffusion model, built on PyTorch Lightning and diffusers."""

from pathlib import Path

from hynea_pl._offline import apply_offline_defaults
from hynea_pl.paths import register_scheme

apply_offline_defaults()

__version__ = "0.1.0"


def _resolve_zoo_uri(uri: str) -> Path:
    """``zoo://<profile>/<component>`` -> a local path; imports the zoo only when such a URI is resolved."""
    from hynea_pl.zoo import resolve_zoo_uri

    return resolve_zoo_uri(uri)


register_scheme("zoo", _resolve_zoo_uri)
