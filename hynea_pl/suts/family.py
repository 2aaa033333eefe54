"""Model families: which kind of model a SUT, a steering model or a judge is, so that the campaign can refuse a
judge of the same family as a model that steers the search (the judge would share its blind spots).

A network names its family with a ``family`` attribute (the zoo's ``SmallCNN`` is ``cnn``, ``OracleNet``
``resnet``, the k-NN judge ``knn``); otherwise the family is the lower-cased class name without trailing digits
(timm's ``ConvMixer`` -> ``convmixer``, torchvision's ``ResNet`` -> ``resnet``, ``VisionTransformer`` ->
``visiontransformer``). Wrappers (a :class:`~hynea_pl.suts.SUT`, an ensemble, a unanimous vote, a window reader)
list the attributes that hold their members in ``family_members``; their families are their members'.
"""

from __future__ import annotations

import re

from torch import nn


def network_family(network: nn.Module) -> str:
    """The family of one network: its ``family`` attribute, else its lower-cased class name without digits."""
    family = getattr(network, "family", None)
    if isinstance(family, str) and family:
        return family
    return re.sub(r"\d+$", "", type(network).__name__.lower())


def model_families(model: nn.Module) -> frozenset[str]:
    """Every family in ``model``: a wrapper's members' (``family_members``), or the network's own."""
    members = getattr(model, "family_members", None)
    if members is None:
        return frozenset({network_family(model)})
    found: set[str] = set()
    for name in members:
        member = getattr(model, name)
        for module in (member if isinstance(member, (nn.ModuleList, list, tuple)) else [member]):
            found |= model_families(module)
    return frozenset(found)




def model_data(model: nn.Module | None) -> frozenset[str]:
    """The names of the data every module in ``model`` learnt from or keeps as its reference: the union of their
    ``training_data`` attributes (a zoo model: ``zoo-digits:<split>``, the split its entry recorded; a user's model
    names none). The campaign refuses a method's model that shares one with the verdict's judges or realism test."""
    if model is None:
        return frozenset()
    return frozenset(name for module in model.modules() for name in getattr(module, "training_data", ()) or ())


__all__ = ["model_data", "model_families", "network_family"]
