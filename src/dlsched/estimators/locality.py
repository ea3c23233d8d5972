"""Locality in PAL's placement: the L x V matrix and the cross-node penalties (PAL, SC'24, section III-C).

A job spread over more nodes runs slower (a locality penalty); a job on worse GPUs runs slower too (their
binned PM-score). PAL weighs the two in one matrix: locality levels (within a node, within a rack, across)
times the bins' PM-scores, walked from the smallest product, so a placement takes a slightly worse GPU
bin over a much looser placement and the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from dlsched.catalog import PalConstants
from dlsched.catalog.pal_constants import MEASURED_FILE as PAL_CONSTANTS_FILE
from dlsched.datadir import data_dir as default_data_dir


@dataclass(frozen=True)
class LvMatrix:
    """PAL's L x V matrix for one class: ``products[l, v] = penalty[l] * levels[v]``.

    Levels of locality run from the tightest (within a node, penalty 1.0) to the loosest (across nodes, or
    across racks when the cluster has racks). :meth:`traversal` lists the entries from the smallest product;
    ties go to the tighter locality level, then to the better bin.
    """

    level_names: tuple[str, ...]
    penalties: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def products(self) -> np.ndarray:
        return np.outer(np.asarray(self.penalties), np.asarray(self.values))

    def traversal(self) -> list[tuple[int, int]]:
        """(level index, bin index) from the smallest LV-product to the largest."""
        return traversal_order(self.penalties, self.values)

    def render(self) -> str:
        width = max(8, *(len(n) for n in self.level_names))
        head = " " * width + "".join(f"{v:>9.3f}" for v in self.values)
        rows = [f"{n:<{width}}" + "".join(f"{p * v:>9.3f}" for v in self.values)
                for n, p in zip(self.level_names, self.penalties, strict=True)]
        return "\n".join([head, *rows])


@lru_cache(maxsize=4096)
def traversal_order(penalties: tuple[float, ...], values: tuple[float, ...]) -> list[tuple[int, int]]:
    """(level, bin) entries of an L x V matrix from the smallest product; ties: tighter level, better bin."""
    entries = [(p * v, li, vi) for li, p in enumerate(penalties) for vi, v in enumerate(values)]
    entries.sort()
    return [(li, vi) for _, li, vi in entries]


def lv_matrix(levels: np.ndarray | Sequence[float], l_across: float, *, l_rack: float | None = None,
              racks: bool = False) -> LvMatrix:
    """The L x V matrix of one class for a cross-node penalty (and a rack level when ``racks``)."""
    vals = tuple(float(v) for v in levels)
    if racks:
        rack = l_rack if l_rack is not None else default_rack_penalty(l_across)
        return LvMatrix(("within node", "within rack", "across racks"), (1.0, float(rack), float(l_across)), vals)
    return LvMatrix(("within node", "across nodes"), (1.0, float(l_across)), vals)


def default_rack_penalty(l_across: float) -> float:
    """Penalty of spanning nodes inside one rack when not given: halfway between 1 and ``l_across``."""
    return 1.0 + (float(l_across) - 1.0) / 2.0


#: The constant cross-node penalty PAL estimated on Frontera (ResNet-50, 4 vs 8 GPUs) and used for Synergy.
FRONTERA_PENALTY = 1.7


class LocalityPenalties:
    """The cross-node penalty a scheduler assumes per (model, GPU count), or one constant.

    PAL measured per-model penalties on its Frontera testbed and uses them in its Sia-Philly simulations;
    pairs it did not measure cost nothing (1.0). The table is PAL's constants as the catalog holds them
    (:class:`dlsched.catalog.PalConstants`): ``pal_simulation_constants.json`` in the data directory, or,
    without it, the same numbers shipped in the package.
    """

    def __init__(self, table: Mapping[str, Mapping[int, float]] | None = None, constant: float | None = None) -> None:
        self.constant = None if constant is None else float(constant)
        self._table = {m: dict(t) for m, t in (table or {}).items()}
        self._folded = {m.casefold(): m for m in self._table}

    @classmethod
    def constant_penalty(cls, value: float) -> LocalityPenalties:
        return cls(None, value)

    @classmethod
    def from_data(cls, data_dir: Path | str | None = None) -> LocalityPenalties:
        """PAL's table from ``data_dir`` (else the configured data directory), or the packaged copy."""
        root = default_data_dir() if data_dir is None else Path(data_dir)
        if root is not None and (root / PAL_CONSTANTS_FILE).is_file():
            return cls(PalConstants.from_data_dir(root).locality_table())
        return cls(PalConstants.load().locality_table())

    def penalty(self, model: str, num_gpus: int) -> float:
        if self.constant is not None:
            return self.constant
        name = model if model in self._table else self._folded.get(str(model).casefold())
        if name is None:
            return 1.0
        return float(self._table[name].get(int(num_gpus), 1.0))

    def table(self) -> dict[str, dict[int, float]]:
        return {m: dict(t) for m, t in self._table.items()}
