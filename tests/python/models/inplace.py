import torch
import torch.nn as nn


class Model(nn.Module):
    """An in-place update of an input that is returned: not translated as if it were pure."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.mul_(2)
        return x


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
