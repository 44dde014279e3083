# sin of inputs spread over many periods (KernelBench's format): its example
# inputs are randn * 10, and a kernel is judged on inputs like them
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sin(x)


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim) * 10]


def get_init_inputs():
    return []
