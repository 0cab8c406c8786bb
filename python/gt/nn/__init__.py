"""gt.nn: modules, losses and optimizers (the seeds' `from gt.nn import Module, Linear, SGD`)."""

from . import functional
from .functional import (binary_cross_entropy, cross_entropy, dropout, embedding, gelu, layer_norm, linear, log_softmax,
                         mse_loss, relu, sigmoid, softmax, tanh, scaled_dot_product_attention)
from .modules import (BCELoss, CrossEntropyLoss, Dropout, Embedding, GELU, Identity, LayerNorm, Linear, LogSoftmax,
                      Module, ModuleList, MSELoss, Parameter, ReLU, Sequential, Sigmoid, Softmax, Tanh)
from ..optim import SGD, Adam, AdamW
from . import utils

__all__ = ["Module", "Linear", "Sequential", "ModuleList", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity", "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter", "SGD", "Adam", "AdamW", "functional", "utils"] + functional.__all__
