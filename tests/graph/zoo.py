"""The model zoo of the IR round-trip tests: one small model per structure the exporter produces
(linear chains, conv + batch norm + pooling, residual adds, attention, recurrent layers, a
dynamic batch dimension, torch.cond control flow, in-place buffer mutation)."""

import torch
from torch import nn
from torch.export import Dim


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class ResidualBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.lstm = nn.LSTM(12, 6, batch_first=True)

    def forward(self, x):
        y, _ = self.gru(x)
        z, (h, c) = self.lstm(y)
        return z, h


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.a(t).relu(), lambda t: self.b(t).sigmoid(), (x,))


class Counter(nn.Module):
    """Mutates buffers in place: a step counter and a running mean."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("mean", torch.zeros(4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.steps.add_(1)
        self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.lin(x - self.mean)


def _dynamic_mlp():
    return MLP().eval(), (torch.randn(5, 16),), {"dynamic_shapes": ({0: Dim("batch", min=2, max=64)},)}


# name -> factory returning (model, example args, export kwargs)
ZOO = {
    "mlp": lambda: (MLP().eval(), (torch.randn(4, 16),), {}),
    "cnn_bn_pool": lambda: (CNN().eval(), (torch.randn(2, 3, 12, 12),), {}),
    "residual_block": lambda: (ResidualBlock().eval(), (torch.randn(2, 8, 6, 6),), {}),
    "transformer_encoder": lambda: (Encoder().eval(), (torch.randn(2, 5, 16),), {}),
    "gru_lstm": lambda: (Recurrent().eval(), (torch.randn(2, 7, 8),), {}),
    "dynamic_batch": _dynamic_mlp,
    "cond": lambda: (Branchy().eval(), (torch.randn(3, 4),), {}),
    "buffer_mutation": lambda: (Counter(), (torch.randn(3, 4),), {}),
}


def exported(name):
    """(GraphModule from torch.export, example args) of a zoo model, with a fixed seed."""
    torch.manual_seed(0)
    model, args, kwargs = ZOO[name]()
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d,)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return torch.export.export(model, args, **kwargs).module(), args
