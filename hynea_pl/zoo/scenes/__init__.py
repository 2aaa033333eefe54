"""Digit scenes (issue 17): 64x64 canvases of real MNIST digits (:mod:`~hynea_pl.zoo.scenes.data`), their YOLO
dataset (:mod:`~hynea_pl.zoo.scenes.yolo_dataset`), the zoo components trained on them: the multi-label attribute
SUT and oracle (:mod:`~hynea_pl.zoo.scenes.attributes`) and the digit detector (:mod:`~hynea_pl.zoo.scenes.detector`),
how these SUTs read generated scenes (:mod:`~hynea_pl.zoo.scenes.scoring`), and the scene generator, the MNIST LDM
drawing the digits of seeded layouts (:mod:`~hynea_pl.zoo.scenes.layout_scenes`)."""

#: The zoo components of the scene tasks (extras): their images are scenes, not single digits, so the digit zoo's
#: embedder and held-out digits do not fit them (realism and diversity of a scene run are reported unavailable).
SCENE_COMPONENTS = ("attribute_sut", "attribute_oracle", "detector_sut", "layout_scenes")
