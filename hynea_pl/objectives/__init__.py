"""Loss terms: image distance plus the SUT task's behaviour loss (the latter lives with each SUT)."""

from hynea_pl.objectives.image_distance import frobenius_distance

__all__ = ["frobenius_distance"]
