import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax over the rows, log_softmax over a dim that is not the last."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1) + torch.log_softmax(x * 3, dim=0)


batch_size = 24
dim = 100


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
