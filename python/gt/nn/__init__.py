"""gt.nn: modules, losses and optimizers (the seeds' `from gt.nn import Module, Linear, SGD`)."""

from . import functional
from .functional import (adaptive_avg_pool2d, avg_pool2d, batch_norm, binary_cross_entropy, conv2d, cross_entropy,
                         dropout, embedding, gelu, layer_norm, linear, log_softmax, max_pool2d, mse_loss, nll_loss, relu,
                         sigmoid, softmax, tanh, scaled_dot_product_attention)
from .modules import (BCELoss, Dropout, Embedding, GELU, Identity, LayerNorm, Linear, LogSoftmax,
                      Module, ModuleList, MSELoss, Parameter, ReLU, Sequential, Sigmoid, Softmax, Tanh)
from ..optim import SGD, Adam, AdamW
from .conv import AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, Flatten, MaxPool2d
from .losses import CrossEntropyLoss, NLLLoss
from . import init, utils

__all__ = ["Module", "Linear", "Sequential", "ModuleList", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Identity", "MSELoss", "BCELoss", "CrossEntropyLoss", "Parameter", "SGD", "Adam", "AdamW", "functional", "utils", "init", "Conv2d", "MaxPool2d",
           "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "Flatten", "NLLLoss"] + functional.__all__
