"""The classification losses with PyTorch's full signatures: NLLLoss and
CrossEntropyLoss (weight, ignore_index, reduction, label_smoothing). gt.nn
exports these; modules.CrossEntropyLoss (ignore_index only) is the older form."""

from . import functional as F
from .modules import Module

__all__ = ["NLLLoss", "CrossEntropyLoss"]


class NLLLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)
