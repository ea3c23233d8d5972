"""PAL's application classes and the benchmark that profiles each one (PAL, SC'24, section III-A).

Per-GPU variability depends on the application, so PAL sorts applications into a few classes and profiles
one representative benchmark per class on every GPU: class A (compute-bound, ResNet-50-like) is the most
sensitive to slow GPUs, classes B and C (BERT-like) less, class D (memory-bound, PageRank-like) hardly at
all. The simulator's truth, the profiles a scheduler sees, the fitted summary and the classifier all name
classes from here, so a class or a benchmark mapping cannot differ between them.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from types import MappingProxyType

#: Letters available for class names: ``classA`` .. ``classZ``.
_LETTERS = string.ascii_uppercase


def class_names(k: int) -> tuple[str, ...]:
    """The first ``k`` class names, most variability-sensitive first (``classA``, ``classB``, ...).

    The classifier may fit more classes than PAL measured; naming them by the same rule keeps a class's
    rank readable from its name.
    """
    if not 0 <= k <= len(_LETTERS):
        raise ValueError(f"between 0 and {len(_LETTERS)} classes can be named, got {k}")
    return tuple(f"class{letter}" for letter in _LETTERS[:k])


#: The classes PAL measured per-GPU variability for, most variability-sensitive first.
CLASSES: tuple[str, ...] = class_names(4)

#: Class of a model nobody profiled: PAL assumes the most sensitive class, so that an unprofiled model is
#: never treated as immune to slow GPUs.
DEFAULT_CLASS: str = CLASSES[0]

#: Benchmark -> the classes it profiles, as PAL's ``profiles.json`` maps them: ResNet-50 profiles class A,
#: BERT classes B and C (so their scores are equal), PageRank class D.
BENCHMARK_CLASSES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "resnet": ("classA",),
    "bert": ("classB", "classC"),
    "pagerank": ("classD",),
})
