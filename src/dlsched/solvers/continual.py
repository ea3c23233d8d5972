"""Warm-started methods over a :class:`~dlsched.solvers.differential.DifferentialAssignment`, side by side.

Every method solves the LP relaxation of the assignment problem (each job at most one option, one capacity
row per resource), keeps what it learnt for the next round, and ends with the thesis's integer shim
(:func:`~dlsched.solvers.shim.shim`), so each round yields a feasible, binary allocation:

* :class:`WarmSimplex` edits one HiGHS model in place as the problem is edited and re-solves with the simplex
  method from the previous basis;
* :class:`ProximalPoint` is the thesis's continual method (section 4.3.2): proximal point iterations, each a
  quadratic program solved by exact block coordinate ascent on its dual (the job rows all at once, each
  resource row exactly), over an active set of options, warm-started from the last round's solution and
  prices;
* :class:`Lagrangian` relaxes only the few coupling rows (one price per resource): for given prices each job
  picks its best option on its own; prices move by exact coordinate line searches on the dual function,
  warm-started from the last round's prices;
* :class:`LPStar` is the baseline: the relaxation built and solved from scratch each round, same shim.

What they share (the round's answer and frame) is in :mod:`dlsched.solvers.method`; the adapter a scheduler
holds across rounds, :class:`~dlsched.solvers.continual_assignment.ContinualAssignment`, in its own module.
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from dlsched.solvers.differential import DifferentialAssignment
from dlsched.solvers.highs import INF, model_status, new_highs, solve_sparse
from dlsched.solvers.method import Method, OutOfTime, RoundResult
from dlsched.solvers.shim import WEIGHT_EPS

__all__ = ["WARM_METHODS", "LPStar", "Lagrangian", "Method", "OutOfTime", "ProximalPoint", "RoundResult",
           "WarmSimplex"]


class LPStar(Method):
    """The relaxation built and solved from scratch every round (HiGHS), then the shim: the thesis's LP*."""

    name = "lpstar"

    def __init__(self, problem: DifferentialAssignment, *, lp_method: str = "simplex", fill: bool = False,
                 upgrade: bool = False) -> None:
        super().__init__(problem, fill=fill, upgrade=upgrade)
        self.lp_method = lp_method

    def relax(self) -> tuple[np.ndarray, float, float, float, dict[str, float]]:
        t0 = time.perf_counter()
        problem, slots, _rows = self.problem.snapshot()
        sparse = problem.to_sparse()
        build_s = time.perf_counter() - t0
        sol = solve_sparse(sparse, integer=False, lp_method=self.lp_method, time_limit_s=self._remaining())
        if not sol.optimal:
            raise OutOfTime
        x = np.zeros(self.problem.num_slots)
        x[slots] = sol.x
        return x, sol.bound, build_s, sol.solve_s, {"iterations": float(sol.iterations)}


class WarmSimplex(Method):
    """One HiGHS model mirrors the problem; edits are applied to it and the simplex restarts from its basis.

    Slots are columns (tombstones are columns fixed at 0), rows are the resource rows then one row per job
    row. Appends become ``addCols``/``addRows`` of just the new part; removals and value changes rewrite the
    touched columns' costs and bounds; a compaction of the problem deletes the same columns and rows here.
    """

    name = "warm-simplex"

    def __init__(self, problem: DifferentialAssignment, *, threads: int = 1, fill: bool = False,
                 upgrade: bool = False) -> None:
        super().__init__(problem, fill=fill, upgrade=upgrade)
        self.h = new_highs(threads)
        self.h.setOptionValue("solver", "simplex")
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        k = problem.num_resources
        self.h.addRows(k, np.full(k, -INF), problem.capacity.astype(float), 0, np.zeros(k, dtype=np.int32),
                       np.zeros(0, dtype=np.int32), np.zeros(0))
        self._cols = 0
        self._rows = 0
        self._dirty: list[tuple[int, int]] = []
        self._all_dirty = False
        self._cap_dirty = False
        problem.subscribe(self)

    # -- subscriber --------------------------------------------------------------------------------------
    def on_remove(self, row: int, start: int, stop: int) -> None:
        if start < self._cols:
            self._dirty.append((start, min(stop, self._cols)))

    def on_values(self, start: int, stop: int) -> None:
        if start < self._cols:
            self._dirty.append((start, min(stop, self._cols)))

    def on_capacity(self, resource: int) -> None:
        self._cap_dirty = True

    def on_compact(self, keep_slots: np.ndarray, keep_rows: np.ndarray) -> None:
        mirrored = keep_slots[keep_slots < self._cols]
        gone = np.setdiff1d(np.arange(self._cols), mirrored).astype(np.int32)
        if len(gone):
            self.h.deleteCols(len(gone), gone)
        kept_rows = keep_rows[keep_rows < self._rows]
        gone_rows = (self.problem.num_resources + np.setdiff1d(np.arange(self._rows), kept_rows)).astype(np.int32)
        if len(gone_rows):
            self.h.deleteRows(len(gone_rows), gone_rows)
        self._cols, self._rows = len(mirrored), len(kept_rows)
        self._dirty.clear()
        self._all_dirty = True  # pending edits were in the old numbering: rewrite every cost once

    # -- sync and solve ------------------------------------------------------------------------------------
    def sync(self) -> None:
        """Apply the edits since the last solve to the HiGHS model (in time proportional to the edits)."""
        p, k = self.problem, self.problem.num_resources
        if p.num_rows > self._rows:
            m = p.num_rows - self._rows
            self.h.addRows(m, np.full(m, -INF), np.ones(m), 0, np.zeros(m, dtype=np.int32),
                           np.zeros(0, dtype=np.int32), np.zeros(0))
            self._rows = p.num_rows
        if self._all_dirty:
            self._dirty = [(0, self._cols)]
            self._all_dirty = False
        if self._dirty:
            idx = np.unique(np.concatenate([np.arange(a, b) for a, b in self._dirty])).astype(np.int32)
            self.h.changeColsCost(len(idx), idx, p.value[idx])
            self.h.changeColsBounds(len(idx), idx, np.zeros(len(idx)), p.upper[idx])
            self._dirty.clear()
        if p.num_slots > self._cols:
            new = np.arange(self._cols, p.num_slots)
            m = len(new)
            index = np.empty(2 * m, dtype=np.int32)
            index[0::2] = p.resource[new]  # resource rows come first, so each column's entries stay sorted
            index[1::2] = k + p.row_of[new]
            vals = np.empty(2 * m)
            vals[0::2] = p.size[new]
            vals[1::2] = 1.0
            self.h.addCols(m, p.value[new], np.zeros(m), p.upper[new], 2 * m,
                           np.arange(0, 2 * m, 2, dtype=np.int32), index, vals)
            self._cols = p.num_slots
        if self._cap_dirty:
            for r in range(k):  # one row per GPU type: a handful
                self.h.changeRowBounds(r, -INF, float(p.capacity[r]))
            self._cap_dirty = False

    def relax(self) -> tuple[np.ndarray, float, float, float, dict[str, float]]:
        t0 = time.perf_counter()
        self.sync()
        t1 = time.perf_counter()
        remaining = self._remaining()
        self.h.setOptionValue("time_limit", float(remaining) if remaining is not None else INF)
        self.h.run()
        t2 = time.perf_counter()
        text, optimal = model_status(self.h)
        if not optimal and text != "Empty":
            raise OutOfTime
        info = self.h.getInfo()
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value, dtype=float) if sol.value_valid else np.zeros(self._cols)
        if len(x) != self.problem.num_slots:  # an empty model (every column compacted away) has no solution
            x = np.zeros(self.problem.num_slots)
        bound = float(info.objective_function_value) if optimal else 0.0 if text == "Empty" else float("nan")
        return x, bound, t1 - t0, t2 - t1, {"iterations": float(info.simplex_iteration_count)}


# -- segment helpers (rows are contiguous, increasing runs of an index array) ----------------------------------
def _segments(keys: np.ndarray) -> np.ndarray:
    """Start of each run of equal consecutive ``keys``."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return np.nonzero(first)[0]


def _segment_argmax(r: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per segment the position of its first maximum."""
    m = np.maximum.reduceat(r, starts)
    lens = np.diff(np.append(starts, len(r)))
    at_max = r == np.repeat(m, lens)
    pos = np.where(at_max, -np.arange(len(r)), -len(r))
    return -np.maximum.reduceat(pos, starts)


class Lagrangian(Method):
    """One price per resource; jobs answer prices on their own; prices by exact coordinate line searches.

    The dual function ``D(p) = p @ C + sum_j max(0, max_o v_o - p[r_o] s_o)`` is convex and piecewise linear
    in the few prices; its minimum is the relaxation's value. Each coordinate step finds the smallest price
    at which the resource's demand fits its capacity (bisection over the demand, a step function), holding
    the other prices; ``sweeps`` passes over the resources, warm-started from the last round's prices. The
    primal weights are each job's best response (0/1); the shim makes them fit.
    """

    name = "lagrangian"

    def __init__(self, problem: DifferentialAssignment, *, sweeps: int = 6, bisections: int = 30,
                 fill: bool = False, upgrade: bool = False) -> None:
        super().__init__(problem, fill=fill, upgrade=upgrade)
        self.sweeps = sweeps
        self.bisections = bisections
        self.price = np.zeros(problem.num_resources)

    def relax(self) -> tuple[np.ndarray, float, float, float, dict[str, float]]:
        t0 = time.perf_counter()
        p = self.problem
        v, s, res, row_of = p.value, p.size, p.resource, p.row_of
        live = np.nonzero(v > 0)[0]  # non-positive options are never worth taking
        R, K = p.num_rows, p.num_resources
        price = self.price
        per: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        best = np.full((R, K), -np.inf)
        for k in range(K):
            idx = live[res[live] == k]
            starts = _segments(row_of[idx])
            rows = row_of[idx][starts]
            per.append((v[idx], s[idx], starts, rows))
            if len(idx):
                best[rows, k] = np.maximum.reduceat(v[idx] - price[k] * s[idx], starts)
        evals = 0
        for _ in range(self.sweeps):
            for k in range(K):
                self._check()
                vk, sk, starts, rows = per[k]
                if len(vk) == 0:
                    price[k] = 0.0
                    continue
                others = np.delete(best[rows], k, axis=1)
                alt = np.maximum(0.0, others.max(axis=1)) if K > 1 else np.zeros(len(rows))
                cap = p.capacity[k]

                def demand(lam: float, vk: np.ndarray = vk, sk: np.ndarray = sk, starts: np.ndarray = starts,
                           alt: np.ndarray = alt) -> float:
                    r = vk - lam * sk
                    arg = _segment_argmax(r, starts)
                    win = r[arg] > alt
                    return float(sk[arg[win]].sum())

                evals += 1
                if demand(0.0) <= cap:
                    lam = 0.0
                else:
                    hi = float(np.max(vk / sk)) + 1e-9
                    lo = 0.0
                    # warm start: bracket the last price first
                    guess = price[k]
                    if 0.0 < guess < hi:
                        evals += 1
                        if demand(guess) <= cap:
                            hi = guess
                            g = guess * 0.9
                            while g > 1e-12:
                                evals += 1
                                if demand(g) > cap:
                                    lo = g
                                    break
                                hi, g = g, g * 0.9
                        else:
                            lo = guess
                            g = guess * 1.1
                            while g < hi:
                                evals += 1
                                if demand(g) <= cap:
                                    hi = g
                                    break
                                lo, g = g, g * 1.1
                    for _ in range(self.bisections):
                        if hi - lo <= 1e-9 * max(1.0, hi):
                            break
                        mid = 0.5 * (lo + hi)
                        evals += 1
                        if demand(mid) <= cap:
                            hi = mid
                        else:
                            lo = mid
                    lam = hi
                price[k] = lam
                best[rows, k] = np.maximum.reduceat(vk - lam * sk, starts)
        # weights: each job's best response 1, its other options with a positive reduced value in proportion
        # to it (so a job whose best response does not fit tries its next best in the shim)
        x = np.zeros(p.num_slots)
        if len(live):
            r = v[live] - price[res[live]] * s[live]
            starts = _segments(row_of[live])
            top = np.maximum.reduceat(r, starts)
            lens = np.diff(np.append(starts, len(live)))
            topr = np.repeat(top, lens)
            ok = (r > 0) & (topr > 0)
            x[live[ok]] = r[ok] / topr[ok]
        dual = float(price @ p.capacity + np.maximum(0.0, best.max(axis=1)).sum()) if R else 0.0
        t1 = time.perf_counter()
        return x, float("nan"), 0.0, t1 - t0, {"evaluations": float(evals), "dual_bound": dual}


class ProximalPoint(Method):
    """The thesis's continual method: proximal point iterations solved by coordinate ascent, warm-started.

    Each proximal step solves ``max v @ x - |x - x_prev|^2 / (2 eta)`` over the relaxation's polytope. Its
    dual has one variable per job row and one per resource; for given duals the primal is explicit,
    ``x = max(0, x_prev + eta (v - mu[row] - y[res] size))`` (upper bounds are implied by the job rows). The
    coordinate ascent alternates an exact step for all job rows at once (disjoint rows: a projection of each
    job's options onto the simplex) with an exact step per resource row (a piecewise-linear root by sorting
    breakpoints). It works on an active set (the options the last round used plus each job's ``width`` best
    options at the current prices) and widens it while an option outside has a positive reduced value.
    Warm start: the last round's ``x`` and prices (``warm=False`` starts every round from zero weights and
    prices instead, which is how figure 4.6's attribution isolates the warm start's share).

    ``prox_steps`` caps the proximal steps per round (15: the 25,600-GPU round stays under a second), and
    ``eta`` sets how far one step may move a weight (about ``eta`` times the gain of a move). The thesis
    solves each round's relaxation to its optimum; a round that stops short leaves a move only partly made
    (its weight shifted part of the way from the job's current option to a better one), the shim keeps the
    option with the larger weight, and the next round, warm-started, carries the move on, so moves of small
    gain land rounds later, or never, where LP* makes them at once. With ``eta`` 100 (the default) 15 steps
    make a move of gain 0.002 at once and the method makes LP*'s moves on Sia's problems; with 10, such moves
    are deferred and fewer jobs restart than under LP* (docs/continual.md). Much larger values overshoot:
    the few coordinate sweeps per step no longer settle the prices.
    """

    name = "continual"

    def __init__(self, problem: DifferentialAssignment, *, eta: float = 100.0, width: int = 4, prox_steps: int = 15,
                 inner: int = 5, tol: float = 1e-3, fill: bool = False, upgrade: bool = False,
                 warm: bool = True) -> None:
        super().__init__(problem, fill=fill, upgrade=upgrade)
        self.warm = warm
        self.eta = eta
        self.width = width
        self.prox_steps = prox_steps
        self.inner = inner
        self.tol = tol
        self.x = np.zeros(0)
        self.y = np.zeros(problem.num_resources)
        problem.subscribe(self)

    def on_remove(self, row: int, start: int, stop: int) -> None:
        if start < len(self.x):
            self.x[start:stop] = 0.0

    def on_values(self, start: int, stop: int) -> None:
        return None  # the warm start stays a good guess; the next solve sees the new values

    def on_capacity(self, resource: int) -> None:
        return None

    def on_compact(self, keep_slots: np.ndarray, keep_rows: np.ndarray) -> None:
        self.x = self.x[keep_slots[keep_slots < len(self.x)]]

    def _active_set(self, v: np.ndarray, s: np.ndarray, res: np.ndarray, row_of: np.ndarray, live: np.ndarray,
                    x: np.ndarray) -> np.ndarray:
        r = v[live] - self.y[res[live]] * s[live]
        starts = _segments(row_of[live])
        chosen = [x[live] > WEIGHT_EPS]
        r = r.copy()
        for _ in range(self.width):
            arg = _segment_argmax(r, starts)
            mask = np.zeros(len(live), dtype=bool)
            mask[arg] = True
            chosen.append(mask)
            r[arg] = -np.inf
        return live[np.logical_or.reduce(chosen)]

    def relax(self) -> tuple[np.ndarray, float, float, float, dict[str, float]]:
        t0 = time.perf_counter()
        p = self.problem
        n = p.num_slots
        if len(self.x) < n:
            self.x = np.concatenate([self.x, np.zeros(n - len(self.x))])
        if not self.warm:
            self.x[:] = 0.0
            self.y[:] = 0.0
        v, s, res, row_of = p.value, p.size, p.resource, p.row_of
        live = np.nonzero(v > 0)[0]
        x = self.x
        x[v <= 0] = 0.0
        W = self._active_set(v, s, res, row_of, live, x)
        sweeps = widen = steps = 0
        mu_full = np.zeros(p.num_rows)
        while True:
            xw, mu, s_used, k_used = self._solve_active(W, x)
            sweeps += s_used
            steps += k_used
            x[W] = xw
            mu_full[:] = 0.0
            rw = row_of[W]
            starts = _segments(rw)
            if len(W):
                mu_full[rw[starts]] = mu
            # pricing: options outside the active set that would enter at these duals
            outside = np.setdiff1d(live, W, assume_unique=True)
            red = v[outside] - mu_full[row_of[outside]] - self.y[res[outside]] * s[outside]
            enter = outside[red > self.tol]
            if len(enter) == 0 or widen >= 3:
                break
            W = np.union1d(W, enter)
            widen += 1
        t1 = time.perf_counter()
        return x.copy(), float(v[W] @ x[W]), 0.0, t1 - t0, {
            "sweeps": float(sweeps), "prox_steps": float(steps), "active": float(len(W)), "widen": float(widen)}

    def _solve_active(self, W: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Proximal point steps on the active set ``W`` (sorted slots, so rows are contiguous runs)."""
        p = self.problem
        eta = self.eta
        v, s, res = p.value[W], p.size[W], p.resource[W]
        rows = p.row_of[W]
        starts = _segments(rows)
        lens = np.diff(np.append(starts, len(W)))
        seg = np.repeat(np.arange(len(starts)), lens)
        cap = p.capacity
        K = p.num_resources
        by_res = [np.nonzero(res == k)[0] for k in range(K)]
        y = self.y
        xw = x[W].copy()
        mu = np.zeros(len(starts))
        sweeps = steps = 0
        for _ in range(self.prox_steps):
            center = xw.copy()
            steps += 1
            settled = False
            for _ in range(self.inner):
                self._check()
                sweeps += 1
                # resource rows, each exactly (given the job duals)
                base = center + eta * (v - mu[seg])
                for k in range(K):
                    idx = by_res[k]
                    if len(idx) == 0:
                        y[k] = 0.0
                        continue
                    y[k] = _resource_price(base[idx], s[idx], eta, cap[k])
                # job rows all at once, exactly (given the prices): project onto {x >= 0, sum x <= 1}
                w = center + eta * (v - y[res] * s)
                theta = _simplex_shift(w, seg, starts)
                mu = theta / eta
                xw = np.maximum(0.0, w - theta[seg])
                # stop when primal feasible and complementary: a priced resource is used up
                viol = np.bincount(res, weights=s * xw, minlength=K) - cap
                slack_ok = (y <= 1e-12) | (viol >= -self.tol * np.maximum(1.0, cap))
                if np.all(viol <= self.tol * np.maximum(1.0, cap)) and np.all(slack_ok):
                    settled = True
                    break
            if settled and np.max(np.abs(xw - center), initial=0.0) <= self.tol:
                break
        return xw, mu, sweeps, steps


def _resource_price(base: np.ndarray, s: np.ndarray, eta: float, cap: float) -> float:
    """Smallest ``y >= 0`` with ``sum s * max(0, base - eta * s * y) <= cap`` (exact, by sorted breakpoints)."""
    pos = base > 0
    b, sz = base[pos], s[pos]
    if float(sz @ b) <= cap:
        return 0.0
    bp = b / (eta * sz)  # the price at which each option drops to 0
    order = np.argsort(-bp)
    bp, b, sz = bp[order], b[order], sz[order]
    A = np.cumsum(sz * b)  # usage with the first i options active: A_i - eta y B_i
    B = np.cumsum(sz * sz)
    yi = (A - cap) / (eta * B)
    nxt = np.append(bp[1:], 0.0)
    ok = np.nonzero((yi <= bp + 1e-12) & (yi >= nxt - 1e-12))[0]
    return float(max(0.0, yi[ok[0]])) if len(ok) else float(bp[0])


def _simplex_shift(w: np.ndarray, seg: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per segment the shift ``theta >= 0`` with ``sum max(0, w - theta) <= 1`` (0 when it already holds)."""
    nseg = len(starts)
    if nseg == 0:
        return np.zeros(0)
    pos = w > 0
    plus = np.bincount(seg, weights=np.where(pos, w, 0.0), minlength=nseg)
    theta = np.zeros(nseg)
    over = plus > 1.0
    if not over.any():
        return theta
    # one positive entry: it is cut to 1 (closed form); only segments with several are sorted
    npos = np.bincount(seg, weights=pos, minlength=nseg)
    single = over & (npos == 1)
    theta[single] = plus[single] - 1.0
    multi = over & (npos > 1)
    if not multi.any():
        return theta
    sel = np.nonzero(multi[seg] & pos)[0]  # entries <= 0 never carry weight once theta >= 0
    # by segment, then largest w first, in one float sort: seg + (1 - w / wmax) lies in [seg, seg + 1)
    wsel = w[sel]
    order = sel[np.argsort(seg[sel] + (1.0 - wsel / (wsel.max() * (1.0 + 1e-9))))]
    ws, sg = w[order], seg[order]
    st = _segments(sg)
    lens = np.diff(np.append(st, len(ws)))
    cs = np.cumsum(ws)
    before = np.repeat(np.append(0.0, cs[st[1:] - 1]), lens)
    css = cs - before
    rank = np.arange(len(ws)) - np.repeat(st, lens) + 1
    cand = (css - 1.0) / rank
    good = ws > cand
    # per segment the largest rank that is good: good ranks are a prefix of each sorted segment
    last = np.maximum.reduceat(np.where(good, np.arange(len(ws)), -1), st)
    theta[sg[st]] = cand[last]
    return theta


#: Warm-started methods by name (what :class:`ContinualAssignment` and benchmarks accept).
WARM_METHODS: dict[str, type[Method]] = {"continual": ProximalPoint, "warm-simplex": WarmSimplex,
                                         "lagrangian": Lagrangian, "lpstar": LPStar}
