"""Reading the user's own data: a folder of labelled images (:func:`read_image_folder`)."""

from hynea_pl.data.image_folder import IMAGE_EXTENSIONS, LabelledImages, read_image_folder

__all__ = ["IMAGE_EXTENSIONS", "LabelledImages", "read_image_folder"]
