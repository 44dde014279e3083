import torch
import torch.nn as nn


class Model(nn.Module):
    """Index maps: transpose, permute, reshape, flatten, unsqueeze/squeeze, a batched matmul."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a = x.transpose(1, 2).contiguous()              # [B, K, M]
        b = y.permute(0, 2, 1)                          # [B, K, N]
        c = torch.bmm(a.transpose(1, 2), b)             # [B, M, N]
        d = c.reshape(-1, c.shape[2]).unsqueeze(0)      # [1, B*M, N]
        return torch.flatten(d.squeeze(0) * 0.5, 0).view(x.size(0), x.size(1), -1)


B = 3
M = 7
K = 9
N = 5


def get_inputs():
    return [torch.randn(B, M, K), torch.randn(B, N, K)]


def get_init_inputs():
    return []
