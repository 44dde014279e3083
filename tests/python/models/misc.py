import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Broadcast batched matmul, matrix-vector, argmin, a reduction over all, SELU and friends."""

    def __init__(self):
        super().__init__()
        self.act = nn.Hardswish()

    def forward(self, A, B, v):
        c = torch.matmul(A, B)                                   # [2, 3, M, N]
        mv = torch.matmul(B.T, v)                                # [N]
        lo = torch.argmin(A, dim=-1)                             # [2, 3, M]
        s = F.log_softmax(A.sum(dim=[0, 1]), dim=-1)             # [M, K]
        e = F.selu(c) + self.act(c) + F.softsign(c) + torch.square(c) * A.min() + F.hardsigmoid(c)
        return e + mv, lo, s


M = 6
K = 10
N = 7


def get_inputs():
    return [torch.randn(2, 3, M, K), torch.randn(K, N), torch.randn(K)]


def get_init_inputs():
    return []
