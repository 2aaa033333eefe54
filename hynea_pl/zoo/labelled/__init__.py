"""The models a labelled-image profile trains, whatever its images: the SUT, the embedder, the autoencoder + LDM,
the validity oracle (a steering model and judges of three families), the realism and acceptance tests; their
training configs (:mod:`~hynea_pl.zoo.labelled.config`), trainers and gates. :mod:`hynea_pl.zoo.labelled.zoo`
registers them as the base zoo. A profile's data comes from :mod:`hynea_pl.zoo.mnist` (the built-in digits) or
:mod:`hynea_pl.zoo.folder` (a folder of the user's images)."""
