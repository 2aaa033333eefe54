"""Reading the user's own data: a folder of labelled images (:func:`read_image_folder`), or any test-image source a
campaign names in ``cases.images`` (:func:`read_test_images`)."""

from hynea_pl.data.image_folder import IMAGE_EXTENSIONS, LabelledImages, read_image_folder
from hynea_pl.data.sources import ZOO_IMAGE_SETS, read_test_images

__all__ = ["IMAGE_EXTENSIONS", "LabelledImages", "ZOO_IMAGE_SETS", "read_image_folder", "read_test_images"]
