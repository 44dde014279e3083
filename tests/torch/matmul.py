# C = A @ B (KernelBench's format): three shape variables, K tied across A and B
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)

M = 48
K = 32
N = 40

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]

def get_init_inputs():
    return []
