#!/usr/bin/env python
"""How well the packaged world reproduces the measured Sia profiles; writes ``docs/world-fit.md``.

Throughput: the packaged step-time model (``dlsched.world.throughput``, exactly what the simulator runs)
against every row of every placements and scalability file, all models and GPU types, nothing left out.
Efficiency: the iterations each profiled batch size needed to reach the final milestone, as implied by the
packaged efficiency table, against the profiles' iteration counts, next to what Pollux's formula would give
from the initial batch's gradient statistics alone.

Held-out (``--heldout``): the step-time model refitted on a seeded split of the rows and judged on the rows it
did not see (whole placement shapes and batch sizes per model and GPU type); prints its table, which
``docs/fidelity.md`` quotes in its "Held-out error" section, and writes nothing.

Usage: ``python scripts/fidelity_report.py [--out docs/world-fit.md] [--heldout]`` (``DLSCHED_DATA`` names the
data).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.datadir import require_data
from dlsched.world.efficiency import EfficiencyModel
from dlsched.world.throughput import ThroughputModel

HERE = Path(__file__).resolve().parent


def _fit_module():
    """scripts/fit_throughput.py, for its row loader (scripts is not a package)."""
    spec = importlib.util.spec_from_file_location("fit_throughput", HERE / "fit_throughput.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules.setdefault("fit_throughput", mod)
    spec.loader.exec_module(mod)
    return mod


def step_time_errors(rows: pd.DataFrame | None = None, tm: ThroughputModel | None = None) -> pd.DataFrame:
    """Every measured row with the packaged model's prediction and its relative error."""
    fit = _fit_module()
    rows = fit.load_profile_rows() if rows is None else rows
    tm = tm or ThroughputModel.load()
    parts = []
    for (model, gtype), g in rows.groupby(["model", "gpu"], sort=True):
        pred = fit.predict(tm.params(model, gtype), g)
        parts.append(g.assign(predicted=pred, rel_err=np.abs(pred / g["step_time"].to_numpy() - 1.0)))
    return pd.concat(parts, ignore_index=True)


def summary(errors: pd.DataFrame) -> tuple[pd.DataFrame, float, float]:
    """Per (model, type): rows, median and p90 relative error; plus the overall median and p90."""
    table = errors.groupby(["model", "gpu"], sort=True)["rel_err"].agg(
        rows="size", median="median", p90=lambda x: float(np.percentile(x, 90))).reset_index()
    e = errors["rel_err"].to_numpy()
    return table, float(np.median(e)), float(np.percentile(e, 90))


#: The held-out split (``--heldout``): seed, and the share of multi-GPU placement shapes and of interior local
#: batch sizes held out per (model, GPU type).
HOLDOUT_SEED = 10
HOLDOUT_SHARE = 0.2
#: Held-out targets (docs/fidelity.md, "Held-out error"): overall median and p90, and the median of every
#: (model, GPU type) and every model's single-GPU rows.
TARGET_MEDIAN = 0.075
TARGET_P90 = 0.20
TARGET_GROUP_MEDIAN = 0.10


def heldout_mask(rows: pd.DataFrame, seed: int = HOLDOUT_SEED, share: float = HOLDOUT_SHARE) -> np.ndarray:
    """Rows held out of the fit: per (model, GPU type), a seeded share of the placement shapes and batch sizes.

    What a scheduler asks the world is the step time of a placement and batch size it has not run, so the split
    holds out whole configurations: ``share`` of the multi-GPU shapes (nodes, GPUs, most GPUs on a node) with
    all their rows, and ``share`` of the local batch sizes strictly inside the profiled range (the world never
    goes beyond the largest profiled batch) on every shape. Single-GPU rows of kept batch sizes stay in the
    fit: every job starts there and the full fit weights them a quarter. At least one shape and one batch size
    are held out wherever a group has three or more of them.
    """
    held = np.zeros(len(rows), dtype=bool)
    for i, ((_model, _gtype), g) in enumerate(rows.groupby(["model", "gpu"], sort=True)):
        rng = np.random.default_rng([seed, i])
        shape = list(zip(g["N"], g["K"], g["kmax"], strict=True))
        shapes = sorted({x for x in shape if x[1] > 1})
        n_shapes = max(1 if len(shapes) >= 3 else 0, round(share * len(shapes)))
        out_shapes = {shapes[j] for j in rng.choice(len(shapes), n_shapes, replace=False)} if n_shapes else set()
        batches = np.unique(g["local_bsz"].to_numpy())[1:-1]
        n_b = max(1 if len(batches) >= 3 else 0, round(share * len(batches)))
        out_b = set(rng.choice(batches, n_b, replace=False).tolist()) if n_b else set()
        mask = np.array([x in out_shapes for x in shape]) | g["local_bsz"].isin(out_b).to_numpy()
        held[rows.index.get_indexer(g.index)] = mask
    return held


def heldout_errors(rows: pd.DataFrame | None = None, seed: int = HOLDOUT_SEED,
                   share: float = HOLDOUT_SHARE) -> pd.DataFrame:
    """Held-out rows with the error of a fit that did not see them, next to the packaged fit's (in-sample).

    The fit on the training rows keeps the model form (which refinements) of the packaged fit and refits the
    parameters (:func:`fit_throughput.refit_group`); the packaged parameters stay fitted on every row.
    """
    fit = _fit_module()
    rows = (fit.load_profile_rows() if rows is None else rows).reset_index(drop=True)
    held = heldout_mask(rows, seed, share)
    tm = ThroughputModel.load()
    parts = []
    for (model, gtype), g in rows.groupby(["model", "gpu"], sort=True):
        test = g[held[g.index]]
        if test.empty:
            continue
        form = tm.params(str(model), str(gtype))
        params = fit.refit_group(g[~held[g.index]], form)
        measured = test["step_time"].to_numpy()
        parts.append(test.assign(rel_err=np.abs(fit.predict(params, test) / measured - 1.0),
                                 in_sample_err=np.abs(fit.predict(form, test) / measured - 1.0)))
    return pd.concat(parts, ignore_index=True)


def render_heldout(errors: pd.DataFrame, total_rows: int) -> str:
    """The held-out table of docs/fidelity.md: per (model, type) and overall, held-out against in-sample."""
    e = errors["rel_err"].to_numpy()
    k1 = errors[errors["K"] == 1]["rel_err"].to_numpy()
    lines = [f"Held out {len(errors)} of {total_rows} rows (seed {HOLDOUT_SEED}, share {HOLDOUT_SHARE:g}): "
             f"held-out median {np.median(e):.1%}, p90 {np.percentile(e, 90):.1%} "
             f"(the packaged fit on the same rows: median {errors['in_sample_err'].median():.1%}, "
             f"p90 {np.percentile(errors['in_sample_err'], 90):.1%}); single-GPU held-out rows {len(k1)}, "
             f"median {np.median(k1):.1%}.", "",
             "| model | GPU type | held-out rows | median | p90 | in-sample median | in-sample p90 |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (model, gtype), g in errors.groupby(["model", "gpu"], sort=True):
        lines.append(f"| {model} | {gtype} | {len(g)} | {g['rel_err'].median():.1%} | "
                     f"{np.percentile(g['rel_err'], 90):.1%} | {g['in_sample_err'].median():.1%} | "
                     f"{np.percentile(g['in_sample_err'], 90):.1%} |")
    lines.append(f"| **all** | | **{len(errors)}** | **{np.median(e):.1%}** | **{np.percentile(e, 90):.1%}** | "
                 f"{errors['in_sample_err'].median():.1%} | {np.percentile(errors['in_sample_err'], 90):.1%} |")
    return "\n".join(lines) + "\n"


def efficiency_check(em: EfficiencyModel, profiles: Path) -> pd.DataFrame:
    """Iterations to the final milestone per batch size: table, profile, and init-batch-only Pollux."""
    out = []
    for model in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"):
        tables = {int(f.stem.split("-")[1]): pd.read_csv(f) for f in (profiles / model).glob("validation-*.csv")}
        b0 = em.init_batch_size(model)
        rows = min(len(t) for t in tables.values())
        base = tables[b0].iloc[:rows]
        prog = base["progress"].to_numpy(float)
        keep = np.concatenate([[True], np.diff(prog) > 0])
        prog, base = prog[keep], base[keep]
        d_samples = np.diff(np.concatenate([[0.0], prog])) * b0
        mid = (np.concatenate([[0.0], prog[:-1]]) + prog) / 2 * b0
        sqr, var = base["grad_sqr"].to_numpy(float), base["grad_var"].to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            phi0 = np.where(sqr > 0, var / np.where(sqr > 0, sqr, 1.0), 1e9)
        for bsz in sorted(tables):
            measured = float(tables[bsz]["iteration"].iloc[:rows][keep].iloc[-1])
            eff = np.array([em.efficiency(model, bsz, p) for p in mid])
            table_it = float(np.sum(d_samples / (eff * bsz)))
            s = bsz / b0
            naive_it = float(np.sum(d_samples / ((phi0 + 1) / (phi0 + s) * bsz)))
            out.append({"model": model, "batch": bsz, "profile": measured, "table": table_it,
                        "table_err": table_it / measured - 1, "init_stats_only": naive_it,
                        "init_stats_err": naive_it / measured - 1})
    return pd.DataFrame(out)


def render(errors: pd.DataFrame, eff: pd.DataFrame) -> str:
    table, med, p90 = summary(errors)
    k1 = errors[errors["K"] == 1]["rel_err"]
    rest = errors[~((errors["model"] == "imagenet") & (errors["gpu"] == "v100"))]["rel_err"]
    onprem = errors[errors["gpu"].isin(["rtx", "a100", "quad"])]["rel_err"]
    src = errors.groupby("source")["rel_err"].agg(["size", "median", lambda x: np.percentile(x, 90)])
    lines = [
        "# Fidelity of the world model against the measured Sia profiles",
        "",
        "Generated by `scripts/fidelity_report.py` from `$DLSCHED_DATA/sia/profiles`; the numbers are what",
        "`tests/world/test_fidelity.py` checks. Relative error is |predicted / measured - 1| of the optimizer-step",
        "time, for every row of every `placements-*.csv` and `scalability-*.csv` file (aws = t4, azure = v100,",
        "dgx-ext = a100, quad, rtx), none left out. For `gpt_pmp` the measured step is the iteration time the",
        "Sia simulator derives from a row, `3*((stages-1)+48)*step_time + sync_time`.",
        "",
        f"**Overall: {len(errors)} rows, median {med:.1%}, 90th percentile {p90:.1%}.** "
        f"Single-GPU rows: {len(k1)} rows, median {np.median(k1):.1%}, p90 {np.percentile(k1, 90):.1%}. "
        f"Sia's on-premise types (rtx, a100, quad): median {np.median(onprem):.1%}, "
        f"p90 {np.percentile(onprem, 90):.1%}. All but imagenet on v100: median {np.median(rest):.1%}, "
        f"p90 {np.percentile(rest, 90):.1%}.",
        "",
        "The aim was a median under 5% and a p90 under 15%: the median is met, the p90 is not. What is left is",
        "mostly measurement noise and a few inconsistent measurement sessions, not a missing term:",
        "",
        "* fitting a separate quadratic curve in log batch size to every single placement (far more freedom than",
        "  any scheduler-usable model) still leaves a p90 of about 10%: that is the noise floor of the profiles,",
        "  largest in the cloud types (aws t4, azure v100);",
        "* imagenet on v100 (the largest single contributor): the scalability rows at 3-5 nodes show a \"sync\"",
        "  time that grows linearly with the local batch, to 5 s and more per step, while the 2-node placement",
        "  rows stay under about 0.6 s; no smooth model of the gradient all-reduce reproduces both,",
        "  and the fit follows the 2-node rows (probably a data-loading bottleneck in that session);",
        "* yolov3 on a100 and v100: a host bottleneck makes compute jump between 2 and 3 GPUs on a node, and",
        "  local batches that are not a multiple of 4 run much slower (on one a100, 23 samples take 45% longer",
        "  than 32); the model has terms for both (`eps`, `pi`) but not their exact shape;",
        "* ncf on v100 and t4: steps of 10-40 ms where cloud jitter is a large fraction of the step.",
        "",
        "By source: " + "; ".join(f"{s} {int(r['size'])} rows, median {r['median']:.1%}, p90 {r.iloc[2]:.1%}"
                                  for s, r in src.iterrows()) + ".",
        "",
        "## Model form",
        "",
        "See the docstring of `dlsched/world/throughput.py`. In short, with K GPUs on N nodes, at most k on a node,",
        "micro-batch b and s accumulation steps:",
        "",
        "    T_grad = (alpha_c^q + (beta_c*b^zeta)^q)^(1/q) * (1 + eps*ln k) * (1 + pi*[b % 4 != 0])",
        "    T_sync = 0 (K=1); alpha_r + beta_r*(K-2) (N=1); alpha_n + beta_n*(K-2) + delta_n*(N-2) (N>1);",
        "             plus kappa*(k-1)^2",
        "    step   = (s-1)*T_grad + (T_grad^gamma + T_sync^gamma)^(1/gamma)   (+ (stages-1)*T_grad for pipelines)",
        "",
        "With q = zeta = 1 and eps = pi = delta_n = kappa = 0 this is Pollux's model. The refinements are fitted",
        "per (model, type) only where they cut that group's mean |log error| by at least 3% (the list is in",
        "`throughput.json`). Fit: weighted least squares on log step time (Cauchy loss, every GPU count",
        "weighted equally and single-GPU rows a quarter of the total, so single-GPU jobs are predicted well).",
        "",
        "## Step time per (model, GPU type)",
        "",
        "| model | GPU type | rows | median | p90 |",
        "|---|---|---:|---:|---:|",
    ]
    for _, r in table.iterrows():
        lines.append(f"| {r['model']} | {r['gpu']} | {int(r['rows'])} | {r['median']:.1%} | {r['p90']:.1%} |")
    lines.append(f"| **all** | | **{len(errors)}** | **{med:.1%}** | **{p90:.1%}** |")
    worst = eff["table_err"].abs().max()
    naive = eff[eff["init_stats_err"].abs() == eff["init_stats_err"].abs().max()].iloc[0]
    lines += [
        "",
        "## Statistical efficiency",
        "",
        "The efficiency model follows Pollux (efficiency = gain / scale with gain = (var + sqr) / (var/scale + sqr)),",
        "but the gradient statistics that enter it are those measured *at each profiled batch size*, tabulated",
        "per statistical epoch (`scripts/fit_efficiency.py`), interpolated in log batch size and extended beyond",
        "the profiled range with Pollux's formula. The profiles' `iteration` columns were produced with these",
        "statistics, so the table reproduces the iterations every batch size needed to reach the final milestone",
        f"to within {worst:.1%} (table below). Using the initial batch's statistics for every batch size (the",
        "textbook reading of Pollux) would get large batches badly wrong, because the noise measured at large",
        "batches is larger on the initial-batch scale: worst case "
        f"{naive['model']} at {int(naive['batch'])}, {naive['init_stats_err']:+.0%} iterations. The first epoch",
        "uses the efficiency implied by the profile's own iteration count, since the first row's statistics are",
        "end-of-epoch values (for yolov3 at 512 they would imply ten times the iterations actually taken).",
        "Efficiency is made non-increasing in batch size (the raw values wobble by up to 1%), is 1 at the initial",
        "batch size, and is constant within a statistical epoch. Progress is counted in samples at the initial",
        "batch size; `gpt_pmp` reuses bert's table, as in Sia.",
        "",
        "| model | batch | profile iterations | table | error | init-batch stats only | error |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for _, r in eff.iterrows():
        lines.append(f"| {r['model']} | {int(r['batch'])} | {r['profile']:.0f} | {r['table']:.0f} | "
                     f"{r['table_err']:+.1%} | {r['init_stats_only']:.0f} | {r['init_stats_err']:+.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE.parent / "docs" / "world-fit.md")
    ap.add_argument("--heldout", action="store_true",
                    help="print the held-out table (fit on a seeded split, judged on the rest) and write nothing")
    args = ap.parse_args(argv)
    if args.heldout:
        fit = _fit_module()
        rows = fit.load_profile_rows()
        print(render_heldout(heldout_errors(rows), len(rows)))
        return 0
    profiles = require_data("sia/profiles", "Sia profiles")
    errors = step_time_errors()
    eff = efficiency_check(EfficiencyModel.load(), profiles)
    text = render(errors, eff)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
