"""Reading the user's own data: a folder of labelled images (:func:`read_image_folder`), and the on-disk store a zoo
trains from (:func:`write_image_store`, :func:`open_image_store`, :func:`stratified_splits`)."""

from hynea_pl.data.image_folder import IMAGE_EXTENSIONS, LabelledImages, read_image_folder
from hynea_pl.data.image_store import (
    BadImageData,
    ImageStore,
    check_class_counts,
    image_folder_fingerprint,
    listed_labels,
    open_image_store,
    stratified_splits,
    write_image_store,
)

__all__ = [
    "IMAGE_EXTENSIONS", "BadImageData", "ImageStore", "LabelledImages", "check_class_counts",
    "image_folder_fingerprint", "listed_labels", "open_image_store", "read_image_folder", "stratified_splits",
    "write_image_store",
]
