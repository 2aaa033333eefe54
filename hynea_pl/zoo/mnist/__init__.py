"""The built-in profiles' data source and defaults: the MNIST digits (:mod:`~hynea_pl.zoo.mnist.data`) and the
``full`` and ``tiny`` profiles (:mod:`~hynea_pl.zoo.mnist.profiles`). The models they train are
:mod:`hynea_pl.zoo.labelled`'s."""
