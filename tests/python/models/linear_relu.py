import torch
import torch.nn as nn


class Model(nn.Module):
    """A two-layer MLP: Linear, ReLU, Linear without bias, on a flattened input."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, out_features, bias=False)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return self.fc2(self.act(self.fc1(x)))


batch = 10


def get_inputs():
    return [torch.randn(batch, 4, 8)]


def get_init_inputs():
    return [32, 24, 12]
