"""Models for the PT2E tests: the IR zoo plus a MobileNet-style depthwise CNN, a small GPT-style
decoder block, a tied-embedding LM and a CNN written with torchvision's in-place idioms."""

import copy

import torch
from torch import nn

from tests.graph.zoo import ZOO


class MobileNetish(nn.Module):
    """Inverted residual blocks: pointwise expand, depthwise 3x3, pointwise project, ReLU6."""

    def __init__(self):
        super().__init__()

        def block(cin, cout, expand, stride):
            mid = cin * expand
            return nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
                                 nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
                                 nn.ReLU6(), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.b1 = block(8, 8, 2, 1)
        self.b2 = block(8, 16, 3, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.b1(x)
        x = self.b2(x)
        return self.fc(torch.flatten(self.pool(x), 1))


class GPTBlock(nn.Module):
    """Pre-norm decoder block: causal self-attention with explicit matmuls, then a GELU MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class TiedLM(nn.Module):
    """An embedding whose table is also the output head's weight (tied, as in GPT-2): one tensor
    behind two get_attr nodes, the second one quantized last."""

    def __init__(self, vocab=50, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.relu(self.mix(self.emb(ids))))


class InplaceCNN(nn.Module):
    """torchvision's in-place idioms: one nn.ReLU(inplace=True) called by a stem and twice by a
    BasicBlock-style block, `out += identity`, a max pool after a relu_, a cat of ReLU6 /
    Hardswish (inplace) branches, SiLU(inplace), and F.relu(x, inplace=True)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)
        self.c1, self.b1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.e1, self.a1 = nn.Conv2d(8, 8, 1), nn.ReLU6(inplace=True)
        self.e3, self.a3 = nn.Conv2d(8, 8, 3, padding=1), nn.Hardswish(inplace=True)
        self.mix, self.act = nn.Conv2d(16, 16, 1), nn.SiLU(inplace=True)
        self.last = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(self.relu(self.stem(x)))
        out = self.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        out += x
        x = self.relu(out)
        x = self.act(self.mix(torch.cat([self.a1(self.e1(x)), self.a3(self.e3(x))], 1)))
        x = torch.nn.functional.relu(self.last(x), inplace=True)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


MODELS = {
    "mlp": ZOO["mlp"],
    "cnn_bn_pool": ZOO["cnn_bn_pool"],
    "residual_block": ZOO["residual_block"],
    "transformer_encoder": ZOO["transformer_encoder"],
    "dynamic_batch": ZOO["dynamic_batch"],
    "cond": ZOO["cond"],
    "mobilenetish": lambda: (MobileNetish().eval(), (torch.randn(2, 3, 16, 16),), {}),
    "gpt_block": lambda: (GPTBlock().eval(), (torch.randn(2, 6, 32),), {}),
    "tied_lm": lambda: (TiedLM().eval(), (torch.randint(0, 50, (2, 8)),), {}),
    "inplace_cnn": lambda: (InplaceCNN().eval(), (torch.randn(2, 3, 16, 16),), {}),
}


def make(name):
    """(eval model with non-trivial BatchNorm statistics, example args, export kwargs)."""
    torch.manual_seed(0)
    model, args, kwargs = MODELS[name]()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model, args, kwargs


def export_twice(name):
    """Two independent exports of the same model (one per flow), and the example args."""
    model, args, kwargs = make(name)
    a = torch.export.export(copy.deepcopy(model), args, **kwargs).module()
    b = torch.export.export(copy.deepcopy(model), args, **kwargs).module()
    return a, b, args


def calibration_batches(args, n=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randn(a.shape, generator=g) * (1 + 0.3 * i) if a.is_floating_point() else
                  torch.randint(0, int(a.max()) + 1, a.shape, generator=g) for a in args) for i in range(n)]
