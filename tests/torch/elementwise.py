# gelu(x) * y + 0.5 (KernelBench's format): one variable per dimension, x and y alike
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.nn.functional.gelu(x) * y + 0.5

batch_size = 8
dim = 64

def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
