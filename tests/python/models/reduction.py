import torch
import torch.nn as nn


class Model(nn.Module):
    """Reductions over one dim (kept and dropped), over several, over all, and the index of the max."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        s = torch.sum(x, dim=self.dim)
        m = x.mean(dim=1, keepdim=True)
        mx = torch.max(x, dim=1)[0] + x.min(dim=2).values.sum(dim=1, keepdim=True)
        am = torch.amax(x, dim=(0, 2))
        total = x.prod(dim=2).sum() + x.sum()
        return s * 2 + m.squeeze(1), mx - total, am, torch.argmax(x, dim=1)


B = 4
R = 12
C = 30


def get_inputs():
    return [torch.randn(B, R, C)]


def get_init_inputs():
    return [1]
