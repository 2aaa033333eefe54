"""The zoo's acceptance test for a method's results: the steering member's features and the method's own digits."""

from __future__ import annotations

from torch import nn

from hynea_pl.methods.acceptance import AcceptanceTest
from hynea_pl.zoo.labelled.classifier import normalize
from hynea_pl.zoo.splits import SPLITS, load_splits

__all__ = ["ZooAcceptance"]


class _Features(nn.Module):
    """``(B, 1, 32, 32)`` in [0, 1] -> the penultimate features ``(B, D)`` of a zoo oracle member's network."""

    family_members = ("member",)

    def __init__(self, member: nn.Module) -> None:
        super().__init__()
        self.member = member

    def forward(self, images):
        return self.member.network.features(normalize(images))


class ZooAcceptance(AcceptanceTest):
    """:class:`~hynea_pl.methods.acceptance.AcceptanceTest` on the embedded zoo: the features of the steering member
    (``steer-cnn``, a plain CNN: a family no judge has), fitted on the first ``n_images`` digits of the method's split
    (disjoint from the judges' digits and from the realism test's reference).

    Args:
        profile: zoo profile (built on first use).
        member: the oracle member whose penultimate features are read (a network with ``features``).
        split: the digits it is fitted on (:data:`~hynea_pl.zoo.splits.SPLITS`); a campaign refuses the judges'.
        quantile: fraction of each class's fitting digits inside each range.
        n_images: how many of the split's digits it is fitted on.
    """

    def __init__(self, profile: str = "full", member: str = "steer-cnn", split: str = "method",
                 quantile: float = 0.99, n_images: int = 10000) -> None:
        from hynea_pl.zoo.labelled.zoo import load_zoo

        if split not in SPLITS:
            raise ValueError(f"unknown digit split {split!r}; choose one of {list(SPLITS)}")
        zoo = load_zoo(profile)
        network = zoo.oracle(member)
        if not hasattr(getattr(network, "network", None), "features"):
            raise ValueError(f"zoo oracle member {member!r} has no penultimate features to read")
        digits = load_splits(zoo.profile.data)[split]
        super().__init__(_Features(network), digits.train_images[:n_images], digits.train_labels[:n_images],
                         quantile=quantile)
        self.training_data = {f"zoo-digits:{split}"}
        self.profile, self.member, self.split = profile, member, split
