"""PAL's application classifier (PAL, SC'24, section III-A).

Performance variability is application-specific: compute-bound jobs suffer most from slow GPUs, memory-bound
jobs hardly notice. PAL places each application as a point in the (DRAM utilisation, peak functional-unit
utilisation) plane, measured with ``nsight compute``, and groups the points with K-Means into a few classes,
ordered from the most variability-sensitive (class A: compute-bound, high FU and low DRAM utilisation) to
the least (memory-bound). A new application is profiled once and joins the class of the nearest centroid.

Measured coordinates are not published (figure 3 shows them only as a plot), so :data:`DEFAULT_PROFILES`
holds *illustrative* coordinates that place each model where the paper's figure and text put it; what the
simulator and the default mapping use is PAL's model-to-class map itself (:data:`PAL_MODEL_CLASSES`, from
the PAL code that produced the simulations), which :func:`default_classifier` reproduces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dlsched.catalog import DEFAULT_CLASS, PalConstants, class_names
from dlsched.core.errors import InputError

#: Class names, most variability-sensitive first; a class's rank is its placement priority. The classifier
#: may fit up to six classes, two more than PAL measured; they are named by the catalog's rule.
CLASS_NAMES: tuple[str, ...] = class_names(6)


def _pal_model_classes() -> dict[str, str]:
    pal = PalConstants.load()
    return {m: pal.perf_class(m) for m in sorted(pal.models())}


#: PAL's model-to-class map as its simulator uses it (``pal_simulation_constants.json``, held by the
#: catalog), for PAL's own models: class A is ResNet-50-like, B and C are BERT-like, D is PageRank-like.
#: Unknown models are class A.
PAL_MODEL_CLASSES: dict[str, str] = _pal_model_classes()
#: The three-class labels of the paper's Table II (its testbed runs).
PAL_TESTBED_CLASSES: dict[str, str] = {
    "PointNet": "classC", "vgg19": "classA", "DCGAN": "classA", "BERT": "classB", "resnet50": "classA",
    "GPT2": "classB",
}

#: Illustrative (DRAM utilisation %, peak FU utilisation %) per model, placed so that K-Means with K = 4
#: recovers :data:`PAL_MODEL_CLASSES` (see the module docstring: not measured values).
DEFAULT_PROFILES: dict[str, tuple[float, float]] = {
    "resnet50": (22.0, 78.0),
    "BERT": (38.0, 60.0),
    "GPT2": (42.0, 57.0),
    "DCGAN": (35.0, 62.0),
    "vgg19": (55.0, 45.0),
    "PointNet": (70.0, 22.0),
}


def class_rank(name: str) -> int:
    """Placement priority of a class: 0 for class A (most sensitive), then B, C, ...; unknown names last."""
    try:
        return CLASS_NAMES.index(name)
    except ValueError:
        return len(CLASS_NAMES)


@dataclass(frozen=True)
class AppClassifier:
    """K-Means classes over (DRAM utilisation, peak FU utilisation), ordered by variability sensitivity."""

    #: Class centroids in (DRAM, FU) space, row i is class ``names[i]``.
    centroids: np.ndarray
    names: tuple[str, ...]
    #: The applications the classifier was fitted on and their classes.
    assignments: dict[str, str]

    @classmethod
    def fit(cls, profiles: Mapping[str, tuple[float, float]], k: int = 3, *, seed: int = 0) -> AppClassifier:
        """Cluster applications into ``k`` classes; class A is the most compute-bound centroid.

        Sensitivity is ordered by compute intensity: the centroid's peak FU utilisation minus its DRAM
        utilisation, highest first (PAL's class A is compute-bound, the last class memory-bound).
        """
        from sklearn.cluster import KMeans

        if not 1 <= k <= len(CLASS_NAMES):
            raise InputError(f"k must be 1..{len(CLASS_NAMES)}, got {k}", field="k")
        apps = list(profiles)
        if len(apps) < k:
            raise InputError(f"need at least k={k} applications, got {len(apps)}", field="profiles")
        pts = np.array([profiles[a] for a in apps], dtype=float)
        if pts.ndim != 2 or pts.shape[1] != 2 or not np.isfinite(pts).all():
            raise InputError("each profile must be a finite (DRAM utilisation, peak FU utilisation) pair")
        km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(pts)
        centers = km.cluster_centers_
        order = np.argsort(-(centers[:, 1] - centers[:, 0]), kind="stable")
        rank = np.empty(k, dtype=np.int64)
        rank[order] = np.arange(k)
        names = CLASS_NAMES[:k]
        assignments = {a: names[rank[lab]] for a, lab in zip(apps, km.labels_, strict=True)}
        return cls(centroids=centers[order], names=names, assignments=assignments)

    def classify(self, dram_util: float, peak_fu_util: float) -> str:
        """Class of a (new) application: the nearest centroid."""
        d = np.hypot(self.centroids[:, 0] - dram_util, self.centroids[:, 1] - peak_fu_util)
        return self.names[int(np.argmin(d))]

    def class_of(self, model: str, default: str = DEFAULT_CLASS) -> str:
        """Class of an application the classifier was fitted on (``default`` otherwise)."""
        return self.assignments.get(model, default)


def default_classifier() -> AppClassifier:
    """K = 4 over :data:`DEFAULT_PROFILES`: reproduces PAL's simulator map :data:`PAL_MODEL_CLASSES`."""
    return AppClassifier.fit(DEFAULT_PROFILES, k=4)


def model_class(model: str, mapping: Mapping[str, str] | None = None) -> str:
    """PAL's class of a model (exact, then case-insensitive match); unknown models are class A."""
    table = PAL_MODEL_CLASSES if mapping is None else mapping
    if model in table:
        return table[model]
    folded = {k.casefold(): v for k, v in table.items()}
    return folded.get(str(model).casefold(), DEFAULT_CLASS)
