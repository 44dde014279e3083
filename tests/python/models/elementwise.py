import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise ops with broadcasting, scalars on either side and a const argument."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b, scale):
        y = torch.relu(a * b + 1.5) - torch.sigmoid(a) * scale
        y = y + F.gelu(a) - F.gelu(b, approximate="tanh") + F.silu(a) / 2
        y = y + torch.tanh(a).abs() + F.leaky_relu(a, 0.2) - (-a).exp() * 0.01
        y = y + torch.clamp(a, min=-0.5, max=0.5) + F.hardtanh(b) + torch.sqrt(a * a + 1) + torch.rsqrt(b * b + 2)
        y = y + torch.log(a.abs() + 1) + a ** 2 - 1 / (b * b + 1) + (2 - a) + F.elu(a) + F.softplus(b)
        return y


M = 16
N = 40


def get_inputs():
    return [torch.randn(M, N), torch.randn(N), 0.75]


def get_init_inputs():
    return []
