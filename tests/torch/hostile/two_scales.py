# two outputs of different scales (KernelBench's format): log_softmax (RMS
# about 5) and softmax (elements about 0.01); one tolerance scaled by the
# first would let the second be a few percent off
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=-1), torch.softmax(x, dim=-1)


batch_size = 6
dim = 100


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
