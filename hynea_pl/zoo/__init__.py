"""The embedded zoo: real MNIST digits and small models the project trains itself, cached after the first build."""

from hynea_pl.zoo.build import Zoo, build_zoo, load_zoo, resolve_zoo_uri
from hynea_pl.zoo.profiles import PROFILES, ZooProfile, get_profile
from hynea_pl.zoo.quality import ZooQualityError

__all__ = ["PROFILES", "Zoo", "ZooProfile", "ZooQualityError", "build_zoo", "get_profile", "load_zoo", "resolve_zoo_uri"]
