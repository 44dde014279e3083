# exp(3x) (KernelBench's format): a few large elements (its tail) and many
# small ones; a tolerance scaled by the output's RMS, which the tail makes
# hundreds of times its median, would let the small ones go uncomputed
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(3 * x)


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
