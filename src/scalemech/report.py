"""The claims report: each claim of Papers D and W (PAPERS.md §2–3) beside this run's statistic and verdict.

A verdict comes from a rule fixed in code before any data are seen: one small function per
claim, its thresholds named constants, its one-line description printed in the report
(PAPERS.md §6: nothing is tuned to make a verdict pass). Verdicts:

- ``confirmed``: the statistic meets the rule;
- ``not confirmed``: it does not (no clear trend, or a part of the claim fails);
- ``refuted``: it points clearly the other way (the thresholds per rule say what "clearly" is);
- ``not measured in this configuration``: the table is missing or empty, or it has too few
  distinct widths/depths/sample sizes for the rule.

``write_report`` writes ``report.md``: the claims table, then every figure of
``scalemech.plots.FIGURES`` with its caption from ``workflow/report/<stem>.rst``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .plots import FIGURES, choose, default_mk, over_points, over_seeds, table_path
from .tables import check_columns, model_keys, read_table

CONFIRMED, NOT_CONFIRMED, REFUTED = "confirmed", "not confirmed", "refuted"
NOT_MEASURED = "not measured in this configuration"
CLAIM_TABLES = ["covariance", "signal", "training", "dalign", "misalignment", "intervention"]
# benchmarks: time(Gram U-statistics) / time(D×D covariance) per D; 0 where the covariance cannot be formed
BENCHMARK_COLUMNS = ["dim", "gram_over_cov_time"]

MIN_LEVELS = 3  # distinct depths, widths or sample sizes a trend needs (two points are only a sign)
MAJORITY = 0.5  # a trend holds when it holds in more than this fraction of groups
D1_MAX_OFFDIAG = 0.5  # off-diagonal share of ‖Σ‖²_F that still counts as "close to diagonal"
D1_NULL_SDS = 2.0  # a ratio above null + this many sd is more than sampling noise
D2_SPLIT = "test"
D3_TOL = 0.01  # relative change of test loss that counts as a fall or a rise
W1_VIEW, W1_SPLIT = "full", "train"
W1_BOOTSTRAP, W1_LEVEL, W1_SEED = 1000, 0.95, 0
W2_VIEW = "full"
W2_CERT_FRACTION = 0.95  # rows whose Wilson lower bound p_lo stays ≤ B_align
BOUND_TOL = 1e-9  # float slack in B_exact ≤ B_align
W4_MIN_SIGN_AGREE = 0.95
W4_RATIO_RANGE = (0.9, 1.1)  # median observed/predicted at the smallest η (paper: 0.96–0.99)
W5_MAX_TIME_RATIO = 1.0  # Gram route no slower than forming the covariance
W5_REFUTE_TIME_RATIO = 2.0  # Gram route more than twice slower


class NotMeasured(Exception):
    """The tables cannot test a claim; the message says why."""


@dataclass(frozen=True)
class Claim:
    """A claim of the papers and the rule that judges it."""

    id: str
    statement: str  # what the paper says
    rule: str  # one line: how the verdict is reached
    evaluate: Callable[[Mapping[str, pd.DataFrame]], tuple[str, str]]  # tables -> (statistic, verdict)


# -- helpers -----------------------------------------------------------------------------
def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    return (np.cumsum(counts) - (counts - 1) / 2)[inverse]


def spearman(x, y) -> float:
    """Spearman's ρ: the Pearson correlation of average ranks; NaN when x or y is constant."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _table(tables: Mapping[str, pd.DataFrame], name: str, required: list[str], finite: list[str]) -> pd.DataFrame:
    """``tables[name]`` with the ``required`` columns, rows with NaN in ``finite`` dropped; NotMeasured if empty."""
    frame = tables.get(name)
    if frame is None or frame.empty:
        raise NotMeasured(f"no {name} table")
    check_columns(frame, name, required=model_keys() + required)
    frame = frame.dropna(subset=finite)
    if frame.empty:
        raise NotMeasured(f"{name} table has only NaN in {finite}")
    return frame


def _only(frame: pd.DataFrame, column: str, value: object, table: str) -> pd.DataFrame:
    rows = frame[frame[column] == value]
    if rows.empty:
        raise NotMeasured(f"{table} has no rows with {column}={value!r} (has {sorted(frame[column].unique())})")
    return rows


def _trend(rhos: list[float], what: str, sign: int) -> tuple[str, str]:
    """Verdict for a trend of sign ``sign`` judged by the majority of per-group ρ."""
    rhos = np.asarray(rhos, dtype=float)
    along, against = np.mean(sign * rhos > 0), np.mean(sign * rhos < 0)
    statistic = (f"Spearman ρ {'<' if sign < 0 else '>'} 0 in {int(np.sum(sign * rhos > 0))}/{len(rhos)} {what} "
                 f"(median ρ {np.nanmedian(rhos) if np.isfinite(rhos).any() else float('nan'):.2f})")
    verdict = CONFIRMED if along > MAJORITY else REFUTED if against > MAJORITY else NOT_CONFIRMED
    return statistic, verdict


# -- rules -------------------------------------------------------------------------------
def rule_d1(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Median off-diagonal energy ratio over models × points against D1_MAX_OFFDIAG and the null."""
    cov = _table(tables, "covariance", ["offdiag_ratio", "offdiag_ratio_null", "offdiag_ratio_null_sd"],
                 ["offdiag_ratio"])
    ratio, null = cov["offdiag_ratio"].median(), cov["offdiag_ratio_null"].median()
    beyond_noise = (cov["offdiag_ratio"] > cov["offdiag_ratio_null"] + D1_NULL_SDS * cov["offdiag_ratio_null_sd"]).mean()
    statistic = (f"median off-diagonal energy ratio {ratio:.3g} over {len(cov)} model×point rows (null median "
                 f"{null:.3g}); {beyond_noise:.0%} of rows above null + {D1_NULL_SDS:g} sd")
    if ratio <= D1_MAX_OFFDIAG:
        return statistic, CONFIRMED
    return statistic, REFUTED if beyond_noise > MAJORITY else NOT_CONFIRMED


def rule_d2(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family, width): Spearman ρ(depth, ‖μ‖²) on the test split; majority negative."""
    signal = _only(_table(tables, "signal", ["point_index", "split", "mu_sq"], ["mu_sq"]), "split", D2_SPLIT, "signal")
    grid = over_seeds(over_points(signal, ["mu_sq"]), ["mu_sq"])
    rhos = [spearman(g["depth"], g["mu_sq"]) for _, g in grid.groupby(["dataset", "family", "width"])
            if g["depth"].nunique() >= MIN_LEVELS]
    if not rhos:
        raise NotMeasured(f"no (dataset, family, width) group has ≥ {MIN_LEVELS} depths")
    return _trend(rhos, "(dataset, family, width) groups", sign=-1)


def _rebound(losses: np.ndarray) -> bool:
    """Interior minimum with a fall before it and a rise after it, each > D3_TOL relative."""
    best = int(np.argmin(losses))
    margin = losses[best] + D3_TOL * abs(losses[best])
    return 0 < best < len(losses) - 1 and losses[0] > margin and losses[-1] > margin


def rule_d3(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family): rebound in depth at the smallest width, and best grid cell at the largest width."""
    grid = over_seeds(_table(tables, "training", ["test_loss"], ["test_loss"]), ["test_loss"])
    parts = []
    for (dataset, family), g in grid.groupby(["dataset", "family"]):
        narrow = g[g["width"] == g["width"].min()].sort_values("depth")
        if narrow["depth"].nunique() < MIN_LEVELS or g["width"].nunique() < 2:
            continue
        best_width = g.loc[g["test_loss"].idxmin(), "width"]
        parts.append((f"{dataset}/{family}", _rebound(narrow["test_loss"].to_numpy()),
                      best_width == g["width"].max(), best_width == g["width"].min(), best_width))
    if not parts:
        raise NotMeasured(f"no (dataset, family) has ≥ {MIN_LEVELS} depths at its smallest width and ≥ 2 widths")
    statistic = "; ".join(f"{name}: rebound at smallest width {'yes' if rebound else 'no'}, best test loss at width "
                          f"{best:g} ({'the largest' if joint else 'not the largest'})"
                          for name, rebound, joint, _, best in parts)
    if all(rebound and joint for _, rebound, joint, _, _ in parts):
        return statistic, CONFIRMED
    return statistic, REFUTED if all(smallest for *_, smallest, _ in parts) else NOT_CONFIRMED


def _stratified_rho(strata: list[np.ndarray]) -> float:
    """Mean over strata (rows: width, d_align) of ρ(width, d_align); NaN where all are undefined."""
    rhos = [spearman(width, d_align) for width, d_align in strata]
    return float(np.nanmean(rhos)) if np.isfinite(rhos).any() else float("nan")


def rule_w1(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per (dataset, family): mean over depths of ρ(width, d_align) with a seeded bootstrap over models,
    and whether the widest model's interval lies above the narrowest one's at each depth."""
    dalign = _table(tables, "dalign", ["point_index", "view", "split", "d_align", "d_align_lo", "d_align_hi"],
                    ["d_align"])
    dalign = _only(_only(dalign, "view", W1_VIEW, "dalign"), "split", W1_SPLIT, "dalign")
    models = over_points(dalign, ["d_align", "d_align_lo", "d_align_hi"])
    rng = np.random.default_rng(W1_SEED)
    tail = (1 - W1_LEVEL) / 2
    parts, separated = [], []
    for (dataset, family), g in models.groupby(["dataset", "family"]):
        depths = [s.sort_values("width") for _, s in g.groupby("depth") if s["width"].nunique() >= MIN_LEVELS]
        if not depths:
            continue
        strata = [s[["width", "d_align"]].to_numpy(float).T for s in depths]  # each (2, models at one depth)
        boots = [_stratified_rho([s[:, rng.integers(0, s.shape[1], s.shape[1])] for s in strata])
                 for _ in range(W1_BOOTSTRAP)]
        lo, hi = np.nanquantile(boots, [tail, 1 - tail])
        parts.append((f"{dataset}/{family}", _stratified_rho(strata), lo, hi, sum(s.shape[1] for s in strata)))
        separated += [s["d_align_lo"].iloc[-1] > s["d_align_hi"].iloc[0] for s in depths]
    if not parts:
        raise NotMeasured(f"no (dataset, family, depth) has ≥ {MIN_LEVELS} widths")
    statistic = "; ".join(f"{name}: ρ(width, d_align) {rho:.2f} [{lo:.2f}, {hi:.2f}] over {n} models"
                          for name, rho, lo, hi, n in parts)
    statistic += f"; widest interval above narrowest at {sum(separated)}/{len(separated)} depths"
    if all(lo > 0 for _, _, lo, _, _ in parts) and np.mean(separated) > MAJORITY:
        return statistic, CONFIRMED
    return statistic, REFUTED if any(hi < 0 for *_, hi, _ in parts) else NOT_CONFIRMED


def _misalignment(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    values = ["M", "K", "p_misalign", "p_lo", "p_hi", "b_exact", "b_align"]
    frame = _table(tables, "misalignment", ["point_index", "view", "stats_split", *values], ["p_misalign"])
    return _only(frame, "view", W2_VIEW, "misalignment")


def rule_w2(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """At the default (M, K): ρ(width, P) < 0 in most (dataset, family, depth); p_lo ≤ B_align in
    ≥ W2_CERT_FRACTION of all rows; B_exact ≤ B_align everywhere."""
    frame = _misalignment(tables)
    M, K = default_mk(frame)
    fixed = frame[(frame["M"] == M) & (frame["K"] == K)]
    fixed = fixed[fixed["stats_split"] == choose(fixed, "stats_split", None)]
    per_model = over_points(fixed, ["p_misalign"])
    rhos = [spearman(g["width"], g["p_misalign"]) for _, g in per_model.groupby(["dataset", "family", "depth"])
            if g["width"].nunique() >= MIN_LEVELS]
    if not rhos:
        raise NotMeasured(f"no (dataset, family, depth) has ≥ {MIN_LEVELS} widths at M={M}, K={K}")
    trend, verdict = _trend(rhos, f"(dataset, family, depth) groups at M={M}, K={K}", sign=-1)
    bounds = frame.dropna(subset=["p_lo", "b_exact", "b_align"])
    if bounds.empty:
        raise NotMeasured("misalignment has no rows with finite p_lo, B_exact and B_align")
    certified = (bounds["p_lo"] <= bounds["b_align"] + BOUND_TOL).mean()
    ordered = (bounds["b_exact"] <= bounds["b_align"] + BOUND_TOL).mean()
    statistic = f"{trend}; p_lo ≤ B_align in {certified:.1%} of rows; B_exact ≤ B_align in {ordered:.1%}"
    if verdict == REFUTED or certified < W2_CERT_FRACTION:
        return statistic, REFUTED
    return statistic, CONFIRMED if verdict == CONFIRMED and ordered == 1 else NOT_CONFIRMED


def rule_w3(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Per model: ρ(M, P) over the M = K rows (median over points); majority negative."""
    frame = _misalignment(tables)
    square = frame[frame["M"] == frame["K"]]
    if square.empty:
        raise NotMeasured("misalignment has no rows with M = K")
    square = square[square["stats_split"] == choose(square, "stats_split", None)]
    per_model = over_points(square, ["p_misalign"], by=["M"])
    rhos = [spearman(g["M"], g["p_misalign"]) for _, g in per_model.groupby(model_keys())
            if g["M"].nunique() >= MIN_LEVELS]
    if not rhos:
        raise NotMeasured(f"no model has ≥ {MIN_LEVELS} values of M = K")
    return _trend(rhos, "models (ρ undefined where P is constant)", sign=-1)


def rule_w4(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """At the smallest η of each model × point × view: sign agreement and median observed/predicted."""
    frame = _table(tables, "intervention", ["point_index", "view", "eta", "ratio", "sign_agree"],
                   ["eta", "ratio", "sign_agree"])
    smallest_eta = frame.groupby(model_keys() + ["point_index", "view"])["eta"].transform("min")
    smallest = frame[frame["eta"] == smallest_eta]
    agree, ratio = smallest["sign_agree"].astype(bool).mean(), smallest["ratio"].median()
    statistic = (f"at the smallest η ({len(smallest)} rows): signs agree in {agree:.1%}, "
                 f"median observed/predicted {ratio:.3f}")
    low, high = W4_RATIO_RANGE
    if agree >= W4_MIN_SIGN_AGREE and low <= ratio <= high:
        return statistic, CONFIRMED
    return statistic, REFUTED if agree < MAJORITY or ratio <= 0 else NOT_CONFIRMED


def rule_w5(tables: Mapping[str, pd.DataFrame]) -> tuple[str, str]:
    """Median Gram/covariance time ratio at the largest D benchmarked."""
    bench = tables.get("benchmarks")
    if bench is None or bench.empty:
        raise NotMeasured("no benchmarks timing (Gram U-statistics vs D×D covariance)")
    missing = [c for c in BENCHMARK_COLUMNS if c not in bench.columns]
    if missing:
        raise ValueError(f"benchmarks lack column(s) {missing}; need {BENCHMARK_COLUMNS}")
    largest = bench[bench["dim"] == bench["dim"].max()]
    ratio = largest["gram_over_cov_time"].median()
    statistic = f"time(Gram) / time(covariance) = {ratio:.3g} at D = {largest['dim'].iloc[0]:g}"
    if ratio <= W5_MAX_TIME_RATIO:
        return statistic, CONFIRMED
    return statistic, REFUTED if ratio > W5_REFUTE_TIME_RATIO else NOT_CONFIRMED


CLAIMS = [
    Claim("D1", "The activation-gradient covariance is close to diagonal.",
          f"confirmed if the median over models × points of ‖Σ−diag Σ‖²_F / ‖Σ‖²_F (pooled view) ≤ {D1_MAX_OFFDIAG}; "
          f"refuted if above and > null + {D1_NULL_SDS:g} sd in most rows; else not confirmed", rule_d1),
    Claim("D2", "The first-order activation-gradient signal decays as depth grows.",
          f"Spearman ρ(depth, ‖μ‖²) on the {D2_SPLIT} split (median over points, mean over seeds) per (dataset, family, "
          f"width) with ≥ {MIN_LEVELS} depths: confirmed if ρ < 0 in most groups, refuted if ρ > 0 in most", rule_d2),
    Claim("D3", "Test loss improves when depth and width grow together; depth alone at too small a width rebounds.",
          f"per (dataset, family): confirmed if at the smallest width test loss falls then rises with depth (interior "
          f"minimum, both changes > {D3_TOL:.0%}) and the best grid cell is at the largest width, in all; refuted if "
          f"the best cell is at the smallest width in all", rule_d3),
    Claim("W1", "d_align grows with width.",
          f"ρ(width, d_align) (view={W1_VIEW}, split={W1_SPLIT}, median over points) averaged over depths with ≥ "
          f"{MIN_LEVELS} widths, {W1_LEVEL:.0%} bootstrap over models (seed {W1_SEED}, {W1_BOOTSTRAP} draws): confirmed "
          f"if the interval is above 0 in every (dataset, family) and the widest model's d_align interval lies above "
          f"the narrowest's at most depths; refuted if the ρ interval is below 0 in any", rule_w1),
    Claim("W2", "Misalignment falls with width at fixed (M, K); B_exact and B_align bound it, B_align conservatively.",
          f"at the largest M = K with some P > 0 (view={W2_VIEW}): confirmed if ρ(width, P) < 0 in most (dataset, "
          f"family, depth), Wilson p_lo ≤ B_align in ≥ {W2_CERT_FRACTION:.0%} of rows and B_exact ≤ B_align in all; "
          f"refuted if ρ > 0 in most or the certificate fails more often", rule_w2),
    Claim("W3", "Larger M, K lower misalignment further.",
          f"per model, ρ(M, P) over M = K (≥ {MIN_LEVELS} values): confirmed if ρ < 0 for most models, refuted if ρ > 0",
          rule_w3),
    Claim("W4", "A zero-init residual step along −μ_M changes test loss with the predicted sign and keeps 96–99 % "
          "of the predicted magnitude at small η.",
          f"at each series' smallest η: confirmed if signs agree in ≥ {W4_MIN_SIGN_AGREE:.0%} of rows and the median "
          f"observed/predicted is in [{W4_RATIO_RANGE[0]}, {W4_RATIO_RANGE[1]}]; refuted if signs agree in < "
          f"{MAJORITY:.0%} or the median ratio ≤ 0", rule_w4),
    Claim("W5", "d_align is cheap: a few forward/backward passes, never forming the D×D covariance.",
          f"at the largest D benchmarked: confirmed if time(Gram)/time(covariance) ≤ {W5_MAX_TIME_RATIO:g}, refuted "
          f"if > {W5_REFUTE_TIME_RATIO:g}", rule_w5),
]


def claims(tables: Mapping[str, pd.DataFrame],
           benchmarks: pd.DataFrame | Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per claim: claim, statement, statistic, rule, verdict.

    ``benchmarks`` (columns ``BENCHMARK_COLUMNS``, or one dict of them) overrides ``tables['benchmarks']``.
    """
    tables = dict(tables)
    if benchmarks is not None:
        tables["benchmarks"] = benchmarks if isinstance(benchmarks, pd.DataFrame) else pd.DataFrame([dict(benchmarks)])
    rows = []
    for claim in CLAIMS:
        try:
            statistic, verdict = claim.evaluate(tables)
        except NotMeasured as why:
            statistic, verdict = str(why), NOT_MEASURED
        rows.append({"claim": claim.id, "statement": claim.statement, "statistic": statistic, "rule": claim.rule,
                     "verdict": verdict})
    return pd.DataFrame(rows, columns=["claim", "statement", "statistic", "rule", "verdict"])


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame`` (pipes in cells escaped)."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _caption(captions_dir: Path, stem: str) -> str:
    path = captions_dir / f"{stem}.rst"
    return path.read_text().strip() if path.exists() else f"(no caption: {path} is missing)"


def write_report(tables_dir: str | Path, figures_dir: str | Path, out_md: str | Path, *,
                 captions_dir: str | Path = "workflow/report",
                 benchmarks: pd.DataFrame | Mapping[str, float] | None = None) -> Path:
    """Write ``out_md``: the claims table from the tables in ``tables_dir`` (missing ones count as
    not measured; ``benchmarks.csv`` there is read if present), then each figure of ``figures_dir``
    (relative PNG link) with its caption ``captions_dir/<stem>.rst`` (claims table: ``claims.rst``)."""
    tables_dir, figures_dir, out_md, captions_dir = map(Path, (tables_dir, figures_dir, out_md, captions_dir))
    tables = {name: read_table(path, name) for name in CLAIM_TABLES if (path := table_path(tables_dir, name)).exists()}
    if benchmarks is None and (tables_dir / "benchmarks.csv").exists():
        benchmarks = pd.read_csv(tables_dir / "benchmarks.csv")
    verdicts = claims(tables, benchmarks)
    lines = ["# Claims report", "", _caption(captions_dir, "claims"), "", _markdown(verdicts), "", "## Figures", ""]
    for stem in FIGURES:
        png = figures_dir / f"{stem}.png"
        lines.append(f"### {stem}")
        lines.append("")
        lines.append(f"![{stem}]({Path(os.path.relpath(png, out_md.parent)).as_posix()})" if png.exists()
                     else "(figure not produced in this run)")
        lines += ["", _caption(captions_dir, stem), ""]
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(lines))
    return out_md
