"""gt.optim: PyTorch's optimizers over gt tensors, and learning-rate schedules.

Each optimizer has PyTorch's surface (param_groups, add_param_group,
zero_grad(set_to_none=True), defaults, state, state_dict and
load_state_dict) and takes the step torch.optim takes, to the bit (see
sgd_adam.py and adaptive.py for how). Parameters without a grad are skipped.

    optimizer.py     Optimizer: groups, state, step's frame, state dicts
    sgd_adam.py      SGD, Adam, AdamW
    adaptive.py      Adadelta, Adagrad, RMSprop
    lr_scheduler.py  gt.optim.lr_scheduler (StepLR, OneCycleLR, ...)
"""

from . import lr_scheduler
from .adaptive import Adadelta, Adagrad, RMSprop
from .optimizer import Optimizer
from .sgd_adam import SGD, Adam, AdamW

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop", "lr_scheduler"]
