# nn.LayerNorm over the last dimension, its weight and bias the module's
# (KernelBench's format, a level-1 normalisation with weights)
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)


batch_size = 4096
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
