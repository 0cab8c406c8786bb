"""gt.nn: modules, losses and optimizers (the seeds' `from gt.nn import Module, Linear, SGD`)."""

from . import functional
from .modules import (BCELoss, CrossEntropyLoss, Identity, Linear, LogSoftmax, Module, MSELoss, Parameter, ReLU,
                      Sequential, Sigmoid, Softmax, Tanh)
from ..optim import SGD, Adam

__all__ = ["Module", "Linear", "Sequential", "ReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity",
           "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter", "SGD", "Adam", "functional"]
