"""Small real models and the synthetic data they learn, made deterministically from a seed.

Each data set has a structure a model can learn (class-dependent image patterns, a token rule, a
teacher network), so a training job's loss really falls and a target-loss criterion is meaningful. Data are
generated whole from the seed on every worker, so workers share no files and any worker can read any sample
index: what lets a job restart on another world size and continue exactly where its sampler stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - PyTorch's own convention


@dataclass(frozen=True)
class DataSet:
    """Inputs and targets of a whole synthetic data set, indexable by sample."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return int(self.inputs.shape[0])


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels, track_running_stats=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):
    """A ResNet-style CNN (stem, two residual stages, pooled linear head) for 3x16x16 images."""

    def __init__(self, classes: int = 10, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.stage1 = ResidualBlock(width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False)
        self.stage2 = ResidualBlock(2 * width)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage1(F.relu(self.stem(x)))
        x = self.stage2(F.relu(self.down(x)))
        return self.head(x.mean(dim=(2, 3)))


class TinyTransformer(nn.Module):
    """A two-layer causal transformer language model over a small vocabulary."""

    def __init__(self, vocab: int = 32, seq: int = 16, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)
        self.mask: torch.Tensor
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(x) + self.pos[: x.shape[1]], mask=self.mask[: x.shape[1], : x.shape[1]],
                         is_causal=True)
        return self.head(h)


class MLP(nn.Module):
    """Three-layer perceptron classifier."""

    def __init__(self, inputs: int = 32, hidden: int = 64, classes: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _images(n: int, gen: torch.Generator) -> DataSet:
    classes = 10
    patterns = torch.randn(classes, 3, 16, 16, generator=gen)
    labels = torch.randint(0, classes, (n,), generator=gen)
    images = patterns[labels] + 1.5 * torch.randn(n, 3, 16, 16, generator=gen)
    return DataSet(images, labels)


def _tokens(n: int, gen: torch.Generator) -> DataSet:
    vocab, seq = 32, 16
    start = torch.randint(0, vocab, (n, 1), generator=gen)
    step = torch.randint(1, 4, (n, 1), generator=gen)
    seqs = (start + step * torch.arange(seq + 1)) % vocab  # arithmetic progressions: a learnable rule
    noise = torch.rand(n, seq + 1, generator=gen) < 0.05
    seqs = torch.where(noise, torch.randint(0, vocab, (n, seq + 1), generator=gen), seqs)
    return DataSet(seqs[:, :-1], seqs[:, 1:])


def _vectors(n: int, gen: torch.Generator) -> DataSet:
    x = torch.randn(n, 32, generator=gen)
    teacher = torch.randn(32, 8, generator=gen)
    logits = x @ teacher + 0.5 * torch.randn(n, 8, generator=gen)
    return DataSet(x, logits.argmax(dim=1))


def _class_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, target, reduction="sum")


def _token_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # summed over samples, averaged over positions: one sample contributes one unit, as in the other models
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1), reduction="sum") / target.shape[1]


@dataclass(frozen=True)
class ModelKind:
    """A shipped model: how to build it, its data, and its loss summed over a batch's samples."""

    name: str
    description: str
    build: Callable[[], nn.Module]
    data: Callable[[int, torch.Generator], DataSet]
    loss_sum: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


MODELS: dict[str, ModelKind] = {
    "resnet": ModelKind("resnet", "ResNet-style CNN on synthetic 3x16x16 images, 10 classes", SmallResNet,
                        _images, _class_loss),
    "transformer": ModelKind("transformer", "2-layer causal transformer on synthetic 16-token sequences",
                             TinyTransformer, _tokens, _token_loss),
    "mlp": ModelKind("mlp", "3-layer MLP on a synthetic teacher-labelled classification task", MLP, _vectors,
                     _class_loss),
}


def model_kind(name: str) -> ModelKind:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown runtime model '{name}' (known: {', '.join(MODELS)})") from None


def make_data(name: str, size: int, seed: int) -> DataSet:
    """The job's data set: the same on every worker for the same (model, size, seed)."""
    gen = torch.Generator().manual_seed(seed)
    return model_kind(name).data(size, gen)


def make_model(name: str, seed: int) -> nn.Module:
    """The model with its initial weights drawn from the job's seed (the same on every worker)."""
    torch.manual_seed(seed)
    return model_kind(name).build()
