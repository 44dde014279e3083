# the sum over dim 1 with keepdim (KernelBench's format): a reduction, its
# dimension passed to the constructor
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)

batch_size = 4
dim1 = 48
dim2 = 20
reduce_dim = 1

def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]

def get_init_inputs():
    return [reduce_dim]
