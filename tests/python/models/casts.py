import torch
import torch.nn as nn


class Model(nn.Module):
    """Conversions between float and the 16-bit formats (round to nearest even), both ways."""

    def __init__(self):
        super().__init__()

    def forward(self, x, h, b):
        return x.half(), h.float(), x.to(torch.bfloat16), b.float()


N = 65536


def get_inputs():
    return [torch.randn(N), torch.randn(N).half(), torch.randn(N).bfloat16()]


def get_init_inputs():
    return []
