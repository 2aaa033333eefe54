"""Systems under test: frozen models with their preprocessing and task semantics."""

from hynea_pl.suts.preprocess import Preprocess, TensorTransform, timm_preprocess
from hynea_pl.suts.base import SUT, load_state_dict
from hynea_pl.suts.classifier import ClassifierSUT  # first: the tasks register in the order they are defined
from hynea_pl.suts.binary import CELEBA_ATTRIBUTES, BinaryAttributeSUT
from hynea_pl.suts.tasks import task_class, task_classes
from hynea_pl.suts.consensus import UnanimousPresence
from hynea_pl.suts.ensemble import EnsembleClassifierSUT
from hynea_pl.suts.pretrained import PretrainedClassifierSUT, imagenet_preprocess, pretrained_classifier
from hynea_pl.suts.window_reader import DigitWindowReader


def __getattr__(name: str):
    # The detector imports ultralytics lazily (it is heavy and must come after hynea_pl's offline defaults).
    if name in ("YOLODetectorSUT", "detection_margin", "load_yolo"):
        from hynea_pl.suts import detector

        return getattr(detector, name)
    raise AttributeError(f"module 'hynea_pl.suts' has no attribute {name!r}")


__all__ = ["SUT", "BinaryAttributeSUT", "CELEBA_ATTRIBUTES", "ClassifierSUT", "DigitWindowReader",
           "EnsembleClassifierSUT", "PretrainedClassifierSUT", "Preprocess", "TensorTransform", "UnanimousPresence",
           "YOLODetectorSUT", "detection_margin", "imagenet_preprocess", "load_state_dict", "load_yolo",
           "pretrained_classifier", "task_class", "task_classes", "timm_preprocess"]
