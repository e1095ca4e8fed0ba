"""A design's power against the papers' effects (docs/science.md §6, "Design"): for each claim and regime, the
paper's effect in the rule's units, the rule's minimum detectable effect (MDE) at a config's design, and their
ratio (≤ 1: the design resolves the paper's effect).

**Noise, measured** (``noise``): each rule judged on a finished run's tables gives its deciding estimate's SE;
times the square root of the design's leverage (``leverage``: the within-stratum sum of squares of log₂ x over
the architectures for a trend, their number for a mean) that is σ, the SD of one architecture's value in the
rule's units, beside the run's pool, seeds per architecture and median row ``|z|`` (value over SE).

**A design** (``design_table``): ``SE = σ'/√leverage``, ``MDE = mde_factor(df, parts)·SE``, with σ carried from
the measured run to the design's pool ``n`` and seeds ``s``: ``σ' = σ·√(n₀/n)^a·√(s₀/s)`` (``a = 1`` for an
estimate whose noise is the pools' sampling noise, 0 for a z-score, W3's). A rule that divides each stratum by
its RMS (D2, W1) measures in units of the values themselves, which are mostly noise where the run did not
resolve them (median ``|z|`` ≪ 1): with ``z' = z·√(n/n₀)`` the share of the RMS that is signal is
``z'/√(1 + z'²)``, so the paper's effect in those units is the law's times that share, and σ shrinks only by
``√((1 + z₀²)/(1 + z'²))``. Noise measured on one data set and carried to another is a guess, and the
table's note says whose run it comes from.

**The papers' effects** (``SPECS``): where a paper gives a number it is used (Paper W's ``d_align`` 3.9–9.5,
γ = log₂(9.5/3.9)/log₂ 6 ≈ 0.5; its intervention's 96 %); where it gives a direction only, a benchmark is
named (D2: ``‖μ‖² ∝ depth⁻¹``; D1: a diagonal covariance against the rule's 0.05).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..config.grids import model_jobs
from ..stats.misalignment import effective_sample_size
from .common import Tables
from .regimes import EARLY_CLAIM, EARLY_REGIME, early_view
from .rules.misalignment import alignment
from .rules.w1_level import BAND
from .rules.w1_paper import PAPER_EXPONENT
from .rules.w4 import W4_MARGIN
from .units import mde_factor
from .verdicts import CLAIMS

NOISE_COLUMNS = ["claim", "regime", "sigma", "pool", "seeds", "z", "level", "parts"]
TABLE_COLUMNS = ["claim", "regime", "effect", "mde", "ratio", "note"]
RESOLVED_Z = 2.0  # a median row |z| above which a run resolves its statistic
QUICK = "This run is a 15-minute demonstration, offline, on the digits and text that ship with the environment. "


@dataclass(frozen=True)
class Spec:
    """What a claim's rule decides on, for the power of a design: a ``slope`` on log₂ ``x`` within ``strata``
    or a ``mean``; over ``families`` (None: all); its statistic's rows (``table``, ``value``, ``se``) for the
    run's median ``|z|``; ``relative``: values divided by their stratum's RMS; ``pool_power``: ``a`` above;
    ``effect(design, noise)``: the paper's effect in the rule's units; ``what``: the effect in words."""

    kind: str
    effect: Callable[[pd.DataFrame, pd.Series], float]
    what: str
    table: str
    value: str
    se: str | None
    x: str | None = None
    strata: tuple[str, ...] = ()
    families: tuple[str, ...] | None = None
    relative: bool = False
    pool_power: float = 1.0


def law_slope(design: pd.DataFrame, x: str, strata: tuple[str, ...], exponent: float) -> float:
    """The slope per doubling of ``x`` of ``x^exponent`` divided by its RMS within each stratum (a RMS-scaled
    rule's units), pooled over the strata with ≥ 2 values of ``x``."""
    slopes, weights = [], []
    for _, stratum in design.groupby(list(strata)):
        values = np.sort(stratum[x].unique().astype(float))
        if len(values) < 2:
            continue
        y = values**exponent
        y = y / np.sqrt(np.mean(y**2))
        t = np.log2(values) - np.log2(values).mean()
        slopes.append(float(t @ y / (t @ t)))
        weights.append(float(t @ t))
    return float(np.average(slopes, weights=weights)) if slopes else math.nan


def _largest_mk(design: pd.DataFrame) -> int:
    return int(design.attrs["largest_mk"])


SPECS: dict[str, Spec] = {
    "D1": Spec(
        "mean",
        lambda design, noise: 0.05,
        "a diagonal covariance (ρ̄² = 0) against the rule's 0.05 (no number in Paper D)",
        "covariance",
        "offdiag_ratio",
        "offdiag_ratio_null_sd",
    ),
    "D2": Spec(
        "slope",
        lambda design, noise: -law_slope(design, "depth", ("dataset", "family", "width"), -1.0),
        "benchmark ‖μ‖² ∝ depth⁻¹ (no number in Paper D), per depth doubling in RMS units",
        "signal",
        "mu_sq",
        "mu_sq_se",
        "depth",
        ("dataset", "family", "width"),
        relative=True,
    ),
    "W1": Spec(
        "slope",
        lambda design, noise: law_slope(design, "width", ("dataset", "family", "depth"), PAPER_EXPONENT),
        f"Paper W's d_align ∝ width^{PAPER_EXPONENT:.2f}, per width doubling in RMS units",
        "dalign",
        "d_align",
        "d_align_se",
        "width",
        ("dataset", "family", "depth"),
        relative=True,
    ),
    "W1 level": Spec(
        "mean",
        lambda design, noise: BAND[0],
        f"Paper W's least d_align, {BAND[0]:g}, against 0 (four orders below it is refuted)",
        "dalign",
        "d_align",
        "d_align_se",
        families=("llama",),
    ),
    "W2": Spec(
        "slope",
        lambda design, noise: float(noise["level"]) * PAPER_EXPONENT / 2 * math.log(2),
        "Paper W's γ through the certificate, E/√V ∝ width^(γ/2), at the run's own E/√V, per width doubling",
        "misalignment",
        "mu_cross",
        "mu_cross_se",
        "width",
        ("dataset", "family", "depth"),
    ),
    "W2 level": Spec(
        "mean",
        lambda design, noise: math.sqrt(effective_sample_size(_largest_mk(design), _largest_mk(design)) * BAND[0]),
        f"the E/√V Paper W's d_align ≥ {BAND[0]:g} implies at the largest M = K, against 0",
        "misalignment",
        "mu_cross",
        "mu_cross_se",
        families=("llama",),
    ),
    "W3": Spec(
        "mean",
        lambda design, noise: math.sqrt(effective_sample_size(design.attrs["pool"], design.attrs["pool"]) * BAND[0]),
        f"the E/SE Paper W's d_align ≥ {BAND[0]:g} implies at the design's pools, against 0",
        "misalignment",
        "mu_cross",
        "mu_cross_se",
        pool_power=0.0,
    ),
    "W4": Spec(
        "mean",
        lambda design, noise: W4_MARGIN,
        f"the paper's 96 % against the rule's null {0.96 - W4_MARGIN:g}",
        "intervention",
        "ratio",
        None,
    ),
    "W4 held out": Spec(
        "mean",
        lambda design, noise: W4_MARGIN,
        f"the paper's 96 % against the rule's null {0.96 - W4_MARGIN:g}",
        "intervention",
        "ratio_heldout",
        None,
    ),
}
SPECS["W1 along training"] = dataclasses.replace(SPECS["W1"], table="trajectory")
REGIME_POOL = {"trained": ("measure", "train_pool"), EARLY_REGIME: ("early", "pool")}


def architectures(config: dict, families: tuple[str, ...] | None = None) -> pd.DataFrame:
    """One row per architecture of the config's grids (dataset, family, depth, width) with its ``seeds``."""
    rows = pd.DataFrame(
        [{"dataset": j.dataset, "family": j.family, "depth": j.depth, "width": j.width} for j in model_jobs(config)]
    )
    if rows.empty:
        return rows.assign(seeds=0)
    design = rows.groupby(["dataset", "family", "depth", "width"], sort=False).size().reset_index(name="seeds")
    return design[design["family"].isin(families)] if families else design


def leverage(design: pd.DataFrame, spec: Spec) -> tuple[float, int]:
    """``(leverage, df)``: for a mean the architectures and ``n − 1``; for a slope the within-stratum sum of
    squares of log₂ x over the strata with ≥ 2 values, and ``n − strata − 1`` over them."""
    if spec.kind == "mean":
        return float(len(design)), len(design) - 1
    counted = design[design.groupby(list(spec.strata))[spec.x].transform("nunique") >= 2]
    t = np.log2(counted[spec.x].astype(float))
    within = t - t.groupby([counted[c] for c in spec.strata]).transform("mean")
    strata = counted.groupby(list(spec.strata)).ngroups
    return float((within**2).sum()), len(counted) - strata - 1


def median_z(tables: Tables, spec: Spec, families: tuple[str, ...] | None) -> float:
    """The median ``|value/SE|`` over the rows of the spec's statistic (NaN without SEs)."""
    frame = tables.get(spec.table)
    if frame is None or spec.se is None or frame.empty:
        return math.nan
    if families:
        frame = frame[frame["family"].isin(families)]
    z = (frame[spec.value].astype(float) / frame[spec.se].astype(float)).abs()
    return float(z[np.isfinite(z)].median())


def noise(results: dict[str, object], tables: Tables, config: dict) -> pd.DataFrame:
    """The measured noise of each spec'd claim and regime of a finished run: ``NOISE_COLUMNS`` (module doc).
    ``results``: claim id → its ``Result`` on the run's tables (the deciding estimates, the largest SE of a
    claim's parts); ``level``: W2's mean E/√V at the largest M = K, the run's own level."""
    rows = []
    for claim_id, result in results.items():
        base, regime = _split(claim_id)
        spec = SPECS.get(base)
        estimates = [e for _, e in getattr(result, "estimates", ()) if e.measured]
        if spec is None or not estimates:
            continue
        design = architectures(config, spec.families)
        lev, _ = leverage(design, spec)
        section, key = REGIME_POOL.get(regime, ("trajectory", "pool"))
        view = early_view(tables) if regime == EARLY_REGIME else tables
        rows.append(
            {
                "claim": base,
                "regime": regime,
                "sigma": max(e.standard_error for e in estimates) * math.sqrt(lev),
                "pool": config[section][key],
                "seeds": float(design["seeds"].mean()),
                "z": median_z(view, spec, spec.families),
                "level": level(view) if base == "W2" else math.nan,
                "parts": len(result.estimates),
            }
        )
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


def level(tables: Tables) -> float:
    """W2's level: the mean ``E/√V`` over the rows at the largest M = K (full view)."""
    frame = alignment(tables)
    square = frame[frame["M"] == frame["K"]]
    return float(square[square["M"] == square["M"].max()]["r"].mean())


def _split(claim_id: str) -> tuple[str, str]:
    """``(claim, regime)`` of a report row's id."""
    if claim_id.endswith(EARLY_CLAIM):
        return claim_id.removesuffix(EARLY_CLAIM), EARLY_REGIME
    regime = next((c.regime for c in CLAIMS if c.id == claim_id), "trained")
    return claim_id, regime


def design_table(config: dict, measured: pd.DataFrame, source: str) -> pd.DataFrame:
    """``TABLE_COLUMNS`` for the config's design, one row per measured claim and regime (module doc); ``source``
    names the run the noise comes from."""
    rows = []
    for row in measured.itertuples(index=False):
        spec = SPECS[row.claim]
        design = architectures(config, spec.families)
        section, key = REGIME_POOL.get(row.regime, ("trajectory", "pool"))
        design.attrs.update(pool=config[section][key], largest_mk=max(config["misalign"]["sizes"]))
        if design.empty:
            rows.append(dict(claim=row.claim, regime=row.regime, note="no model of the claim's families"))
            continue
        lev, df = leverage(design, spec)
        pool_ratio = row.pool / config[section][key]
        sigma = row.sigma * pool_ratio ** (spec.pool_power / 2) * math.sqrt(row.seeds / design["seeds"].mean())
        effect = spec.effect(design, pd.Series(row._asdict()))
        note = f"{spec.what}; noise of {source}"
        if spec.relative and np.isfinite(row.z):
            z = row.z / math.sqrt(pool_ratio)
            sigma = row.sigma * math.sqrt((1 + row.z**2) / (1 + z**2)) * math.sqrt(row.seeds / design["seeds"].mean())
            effect *= z / math.sqrt(1 + z**2)
            if row.z < RESOLVED_Z:
                note += f"; the run's rows are zero within noise (median |z| {row.z:.2g})"
        mde = mde_factor(df, int(row.parts)) * sigma / math.sqrt(lev) if df >= 1 and lev > 0 else math.nan
        note += needed(mde / effect, len(design), row.z)
        rows.append(dict(claim=row.claim, regime=row.regime, effect=effect, mde=mde, ratio=mde / effect, note=note))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def needed(ratio: float, units: int, z: float) -> str:
    """What a ratio above 1 would take: the MDE falls as 1/√(leverage), and leverage grows in proportion to the
    architectures at the design's spread of depth or width, so about ``units · ratio²`` of them (the t quantiles'
    fall with df aside); where the rows are resolved (median |z| ≥ ``RESOLVED_Z``) the scatter is between
    architectures, which no pool size reduces. Empty at a ratio ≤ 1."""
    if not ratio > 1:
        return ""
    resolved = (
        f"; the rows are resolved (median |z| {z:.2g}): the scatter is between architectures, which no pool reduces"
        if np.isfinite(z) and z >= RESOLVED_Z
        else ""
    )
    return f"{resolved}; about {math.ceil(units * ratio**2)} architectures (now {units}) would bring the ratio to 1"


def measured_noise(tables: Tables, config: dict) -> pd.DataFrame:
    """``noise`` of a finished run: every spec'd claim and regime judged on its tables as the report judges
    them (the training criterion ``train.criterion`` applied first)."""
    from .trained import trained_only, training_check

    kept = trained_only(tables, training_check(tables.get("training"), config["train"]["criterion"]))
    results = {claim.id: claim.judge(kept) for claim in CLAIMS if _split(claim.id)[0] in SPECS}
    return noise(results, kept, config)


def markdown(table: pd.DataFrame) -> list[str]:
    """The design table as markdown lines (effect, MDE to 2 significant digits, the ratio to 2)."""
    lines = [
        "| claim | regime | paper's effect (rule's units) | MDE | MDE / effect | the effect; the noise |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        cells = [
            f"{v:.2g}" if isinstance(v, float) and np.isfinite(v) else "—" for v in (row.effect, row.mde, row.ratio)
        ]
        lines.append(f"| {row.claim} | {row.regime} | {' | '.join(cells)} | {row.note} |")
    return lines


def decidable(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """``(claims, others)``: the claims whose ratio is ≤ 1 in some regime ("W1 along training" is W1 along
    training), and the rest (with their best ratio)."""
    claim = table["claim"].str.removesuffix(" along training")
    best = table.assign(claim=claim, label=table["claim"] + " (" + table["regime"] + ")").sort_values("ratio")
    first = best.drop_duplicates("claim")
    yes = first[first["ratio"] <= 1]
    no = first[~(first["ratio"] <= 1)]
    return list(yes["label"]), [f"{r.claim} ({r.ratio:.2g}×)" for r in no.itertuples()]


def preface(table: pd.DataFrame, source: str, run: str) -> list[str]:
    """The report's first lines: what the quick run is (``QUICK``), which claims this run's design can decide at
    the papers' effect sizes (ratio MDE/effect ≤ 1 in some regime, ``design_table``), which not, and where the
    rest is run."""
    yes, no = decidable(table)
    elsewhere = (
        "" if run == "standard" else " `make standard` (config/standard.yaml: CIFAR-10) is designed for the rest."
    )
    what = QUICK if run == "quick" else ""
    return [
        f"{what}**At the papers' effect sizes** (docs/science.md §6, \"Design\"; noise of {source}): this run's "
        f"design can decide {', '.join(yes) or 'no claim'}; its minimum detectable effect exceeds the paper's for "
        f"{', '.join(no) or 'none'}.{elsewhere}",
        "",
    ]
