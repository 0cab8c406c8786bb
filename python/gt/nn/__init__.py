"""gt.nn: modules, losses and optimizers (the seeds' `from gt.nn import Module, Linear, SGD`)."""

from . import functional
from .functional import (binary_cross_entropy, cross_entropy, gelu, linear, log_softmax, mse_loss, relu, sigmoid,
                         softmax, tanh)
from .modules import (BCELoss, CrossEntropyLoss, GELU, Identity, Linear, LogSoftmax, Module, MSELoss, Parameter, ReLU,
                      Sequential, Sigmoid, Softmax, Tanh)
from ..optim import SGD, Adam

__all__ = ["Module", "Linear", "Sequential", "ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity",
           "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter", "SGD", "Adam", "functional"] + functional.__all__
