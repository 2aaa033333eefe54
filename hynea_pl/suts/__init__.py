"""Systems under test: frozen models with their preprocessing and task semantics."""

from hynea_pl.suts.base import SUT, Preprocess, load_state_dict
from hynea_pl.suts.classifier import ClassifierSUT

__all__ = ["SUT", "ClassifierSUT", "Preprocess", "load_state_dict"]
