"""The embedded zoo: small models the project trains itself, on real MNIST digits or on a folder of the user's
labelled images, cached after the first build.

Layout: the shared machinery at the top (:mod:`~hynea_pl.zoo.registry`: every component and the one routine that
builds, gates and loads them; :mod:`~hynea_pl.zoo.cache`, :mod:`~hynea_pl.zoo.quality`, :mod:`~hynea_pl.zoo.train`,
:mod:`~hynea_pl.zoo.augment`; :mod:`~hynea_pl.zoo.splits`: a profile's images in disjoint splits, whatever their
source), then the models of a labelled-image profile (:mod:`hynea_pl.zoo.labelled`: trainers, gates and the base
zoo's components) and one package per data source or domain: :mod:`hynea_pl.zoo.mnist` (the built-in profiles on the
MNIST digits), :mod:`hynea_pl.zoo.folder` (profiles of the user's images), :mod:`hynea_pl.zoo.scenes` (digit scenes
and their models) and :mod:`hynea_pl.zoo.stylegan` (the style-based GAN).
"""

from hynea_pl.zoo.labelled.config import ZooProfile
from hynea_pl.zoo.labelled.zoo import Zoo, build_zoo, load_zoo
from hynea_pl.zoo.mnist.profiles import PROFILES  # registers the built-in profiles
from hynea_pl.zoo.folder import build_folder_zoo  # registers the profiles of the user's folders
from hynea_pl.zoo.profiles import get_profile, profile_names
from hynea_pl.zoo.quality import ZooQualityError
from hynea_pl.zoo.registry import resolve_zoo_uri

__all__ = [
    "PROFILES", "Zoo", "ZooProfile", "ZooQualityError", "build_folder_zoo", "build_zoo", "get_profile", "load_zoo",
    "profile_names", "resolve_zoo_uri",
]
