"""The MNIST demo's zoo: real digits, the SUT, the embedder, the autoencoder + LDM, the validity oracle, their
profiles and gates; :mod:`hynea_pl.zoo.mnist.zoo` registers them as the base zoo."""
