# LayerNorm over the last dimension (KernelBench's format): its weight starts
# as ones and its bias as zeros, which kwb draws again
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)

rows = 10
features = 32

def get_inputs():
    return [torch.randn(rows, features)]

def get_init_inputs():
    return [features]
