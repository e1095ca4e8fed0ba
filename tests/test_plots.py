"""Figures F1–F11: each draws a PDF and a PNG from synthetic tidy tables, names a missing column,
keeps negative estimates, and draws estimates whose interval contains the null in open markers;
per-point figures use relative depth, single-depth families are left out of depth trends,
F6 shows one ratio per model at the smallest step; every figure states its claims' verdicts from the
verdict table, one number format per axis, legends off the data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from families import TRAINED, accepted_depths
from layout import assert_laid_out, covered_points, drawn
from matplotlib.image import imread
from test_report import make_tables, write_contract_table

import scalemech.figures
from scalemech.figures import (
    FIGURES,
    common,
    f1_covariance,
    f2_signal_decay,
    f3_rebound,
    f4_dalign_vs_width,
    f5_misalignment,
    f6_intervention,
    f7_expansion,
    make_figure,
)
from scalemech.figures.aggregate import choose, default_mk, over_seeds
from scalemech.report.verdicts import CLAIM_FIGURES
from scalemech.stats.powerlaw import powerlaw_table

DPI = 40
NEEDED = {  # one column each of these figures cannot do without, besides the model keys (a new figure may add its own)
    "F1_covariance": ("covariance", "low_rank"),
    "F2_signal_decay": ("signal", "mu_sq_lo"),
    "F3_rebound": ("training", "test_loss"),
    "F4_dalign_vs_width": ("dalign", "d_align_hi"),
    "F5_misalignment": ("misalignment", "b_align"),
    "F6_intervention": ("intervention", "ratio_heldout"),
    "F7_expansion": ("growth", "fallback"),
    "F8_dalign_over_training": ("trajectory", "d_align_lo"),
    "F9_dalign_at_paper_widths": ("trajectory", "d_align_hi"),
    "F10_growth": ("growth", "gain_old_se"),
}


VERDICTS = pd.DataFrame(
    [
        dict(claim=claim, statement="", statistic=f"{claim}'s deciding number 0.12 [0.05, 0.2]", rule="",
             verdict="confirmed", per_seed="", models="2", detail="", figure=stem)
        for claim, stem in CLAIM_FIGURES.items()
    ]
)  # fmt: skip
"""A verdict table (the run's comes from ``report.verdict_rows``): a row for each claim with a figure."""


def tables_of(stem: str, tables: dict[str, pd.DataFrame], **replaced: pd.DataFrame) -> list[pd.DataFrame]:
    """The frames figure ``stem`` draws, in its ``TABLES`` order: ``tables``' (``replaced`` where given),
    ``VERDICTS`` for the verdict table."""
    given = {**tables, "verdicts": VERDICTS, **replaced}
    return [given[name] for name in FIGURES[stem][1]]


def assert_written(out: Path) -> None:
    pdf, png = out.with_suffix(".pdf"), out.with_suffix(".png")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert min(imread(png).shape[:2]) > 50


@pytest.fixture(scope="module")
def tables_dir(tmp_path_factory) -> Path:
    """All tables of two families written as the workflow writes them."""
    folder = tmp_path_factory.mktemp("tables")
    for name, frame in make_tables(1, ("resnet", "llama")).items():
        if name != "benchmarks":
            write_contract_table(frame, folder, name)
    VERDICTS.to_csv(folder / "verdicts.csv", index=False)
    return folder


@pytest.mark.parametrize("stem", FIGURES)
def test_make_figure_writes_pdf_and_png(stem, tables_dir, tmp_path):
    assert_written(make_figure(stem, tables_dir, tmp_path / "figures", dpi=DPI))


@pytest.mark.parametrize("stem", FIGURES)
def test_every_panel_has_data_no_legend_covers_a_point_and_the_verdicts_are_stated(
    stem, tables_dir, tmp_path, monkeypatch
):
    """Two families at several depths and widths each (F2 and F3 draw both): ``layout.assert_laid_out``."""
    figures = drawn(monkeypatch)
    make_figure(stem, tables_dir, tmp_path, dpi=DPI)
    assert_laid_out(stem, figures[stem], VERDICTS)


def _missing(stem: str, table: str, column: str, tmp_path: Path) -> None:
    frames = tables_of(stem, make_tables(1), **{table: make_tables(1)[table].drop(columns=column)})
    with pytest.raises(ValueError, match=column):
        FIGURES[stem][0](*frames, tmp_path / "f.pdf", dpi=DPI)


@pytest.mark.parametrize("stem", FIGURES)
def test_a_missing_model_key_is_named(stem, tmp_path):
    """Every figure, a new one too: its first table without the ``width`` key fails naming it."""
    _missing(stem, FIGURES[stem][1][0], "width", tmp_path)


@pytest.mark.parametrize("stem", NEEDED)
def test_a_missing_needed_column_is_named(stem, tmp_path):
    _missing(stem, *NEEDED[stem], tmp_path)


def test_unknown_figure_is_named():
    with pytest.raises(KeyError, match="F9_nothing"):
        make_figure("F9_nothing", ".", ".")


def _drawn(monkeypatch) -> list:
    """Record (figure, notes) of every figure saved while the test runs."""
    seen = []
    save = common._save

    def kept(fig, out, title, notes, dpi, *args, **kwargs):
        save(fig, out, title, notes, dpi, *args, **kwargs)
        seen.append((fig, list(notes)))

    monkeypatch.setattr(common, "_save", kept)
    return seen


def _plotted(fig, open_markers: bool = False) -> np.ndarray:
    """Every y value the figure's axes draw: lines and markers (only open ones if ``open_markers``), scatters."""
    values = []
    for ax in fig.axes:
        for line in ax.lines:
            hollow = line.get_marker() not in ("None", "", None) and line.get_markerfacecolor() == "none"
            if not open_markers or hollow:
                values.append(np.asarray(line.get_ydata(), dtype=float).ravel())
        if not open_markers:
            values += [
                np.asarray(c.get_offsets(), dtype=float)[:, 1]
                for c in ax.collections
                if hasattr(c, "get_offsets") and len(c.get_offsets())
            ]
    return np.concatenate(values) if values else np.array([])


@pytest.mark.parametrize(
    "stem, table, column",
    [
        ("F2_signal_decay", "signal", "mu_sq"),
        ("F3_rebound", "training", "test_loss"),
        ("F4_dalign_vs_width", "dalign", "d_align"),
        ("F6_intervention", "intervention", "ratio"),
        ("F10_growth", "growth", "gain_old"),
    ],
)
def test_nan_rows_are_dropped_with_a_note(stem, table, column, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    frame = make_tables(1)[table].copy()
    frame.loc[frame.index[::5], column] = np.nan
    FIGURES[stem][0](*tables_of(stem, make_tables(1), **{table: frame}), tmp_path / "f.pdf", dpi=DPI)
    assert_written(tmp_path / "f.pdf")
    assert any(column in note and "dropped" in note for note in seen[-1][1])


@pytest.mark.parametrize(
    "stem, table, column",
    [
        ("F2_signal_decay", "signal", "mu_sq"),
        ("F4_dalign_vs_width", "dalign", "d_align"),
        ("F6_intervention", "intervention", "ratio_heldout"),
    ],
)
def test_negative_estimates_are_plotted_not_dropped(stem, table, column, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    frame = make_tables(1)[table].copy()
    drawn = (frame["split"] == ("test" if table == "signal" else "train")) if "split" in frame else True
    first, second = frame.index[drawn & (frame.get("view", "full") == "full")][:2]  # rows the figure draws
    frame.loc[first, column] = -0.0123
    if f"{column}_lo" in frame:  # an estimate below 0, its interval containing 0
        frame.loc[first, [f"{column}_lo", f"{column}_hi"]] = [-0.05, 0.02]
    FIGURES[stem][0](*tables_of(stem, make_tables(1), **{table: frame}), tmp_path / "f.pdf", dpi=DPI)
    fig, notes = seen[-1]
    assert np.isclose(_plotted(fig), -0.0123).any()
    assert not any(column in note for note in notes)
    if f"{column}_lo" in frame:  # not detectable: drawn as an open marker
        assert np.isclose(_plotted(fig, open_markers=True), -0.0123).any()
        assert not np.isclose(_plotted(fig, open_markers=True), frame.loc[second, column]).any()


def _key(fig) -> list[str]:
    """The labels of the figure's shared key (the legend under its panels)."""
    return [text.get_text() for legend in fig.legends for text in legend.get_texts()]


def test_low_rank_points_are_marked(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    tables = make_tables(1)
    f1_covariance.fig_covariance(tables["covmats"], tables["covariance"], VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    assert any("low-rank" in label for label in _key(seen[-1][0]))
    unmarked = tables["covariance"].assign(low_rank=False)
    f1_covariance.fig_covariance(tables["covmats"], unmarked, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    assert not any("low-rank" in label for label in _key(seen[-1][0]))


def test_misalignment_draws_both_certificates_and_counts_missing_ones(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["misalignment"]
    table = table.assign(b_exact=np.where(table["point_index"] == 0, np.nan, table["b_exact"]))
    f5_misalignment.fig_misalignment(table, VERDICTS, tmp_path / "f.pdf", M=64, K=64, dpi=DPI)
    fig, notes = seen[-1]
    assert any("48 row(s) without a B_exact (two-sample) certificate" in note for note in notes)
    fixed = table[(table["M"] == 64) & (table["K"] == 64)]
    medians = fixed.groupby(["depth", "width"])["b_exact"].median().to_numpy()
    assert np.isclose(_plotted(fig)[:, None], medians[None, :]).any(axis=0).all()


@pytest.mark.parametrize("stem", FIGURES)
def test_empty_tables_give_a_placeholder(stem, tmp_path):
    empty = {name: frame.iloc[:0] for name, frame in make_tables(1).items()}
    FIGURES[stem][0](*tables_of(stem, empty), tmp_path / "f.pdf", dpi=DPI)
    assert_written(tmp_path / "f.pdf")


def test_default_mk_is_the_largest_square_with_a_positive_probability():
    table = make_tables(1)["misalignment"]
    square = table[(table["M"] == table["K"])]
    assert default_mk(table) == (64, 64)
    zeroed = table.assign(p_misalign=np.where(table["M"] >= 64, 0.0, table["p_misalign"]))
    expected = int(square.loc[zeroed.loc[square.index, "p_misalign"] > 0, "M"].max())
    assert default_mk(zeroed) == (expected, expected) == (16, 16)


def test_choose_names_the_allowed_values():
    table = make_tables(1)["misalignment"]
    assert choose(table, "point", None) == "block0"
    with pytest.raises(ValueError, match=r"view='pooled'.*\['full'\]"):
        choose(table, "view", "pooled")


def test_misalignment_at_explicit_mk(tmp_path):
    table = make_tables(1)["misalignment"]
    f5_misalignment.fig_misalignment(table, VERDICTS, tmp_path / "f5.pdf", M=16, K=64, dpi=DPI)
    assert_written(tmp_path / "f5.pdf")


def test_over_seeds_matches_a_direct_computation():
    test = make_tables(1)["signal"].query("split == 'test'")
    two_seeds = pd.concat([test, test.assign(seed=1, mu_sq=3 * test["mu_sq"])])
    grid = over_seeds(two_seeds, ["mu_sq"], by=["point_index"])
    cell = grid[(grid["depth"] == 14) & (grid["width"] == 2) & (grid["point_index"] == 1)]["mu_sq"].item()
    one = test[(test["model"] == "resnet-d14-w2-s0") & (test["point_index"] == 1)]["mu_sq"].item()
    assert cell == pytest.approx(2 * one)  # the mean of one and 3 × one


def test_a_requested_split_or_view_that_is_absent_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"split='valid'.*\['test', 'train'\]"):
        f2_signal_decay.fig_signal(make_tables(1)["signal"], VERDICTS, tmp_path / "f.pdf", split="valid", dpi=DPI)
    with pytest.raises(ValueError, match=r"view='conv'"):
        f4_dalign_vs_width.fig_dalign(make_tables(1)["dalign"], VERDICTS, tmp_path / "f.pdf", view="conv", dpi=DPI)


# -- relative depth (F1, F7) -------------------------------------------------------------
def expected_relative_depth(frame: pd.DataFrame) -> pd.Series:
    """(point_index + 1) / L written out per family: a CIFAR ResNet has 3 (depth − 2) / 6 blocks, a llama depth."""
    blocks = np.where(frame["family"] == "resnet", (frame["depth"] - 2) // 2, frame["depth"])
    return (frame["point_index"] + 1) / blocks


@pytest.mark.parametrize("family", TRAINED)
def test_point_count_matches_the_built_model(family):
    """Every trained family at the deepest depth up to 60 it accepts; a checkpoint's family has no count."""
    from scalemech.models.meta import meta_model

    depth = accepted_depths(family)[-1]
    assert common.point_count(family, depth) == len(meta_model({"family": family, "depth": depth}).insertion_points())
    assert common.point_count("hf", 0) is None


def _xs(ax, labelled: str = "") -> set[float]:
    """Every x value of the marked lines of ``ax`` (only those whose label contains ``labelled``), rounded."""
    lines = [line for line in ax.lines if line.get_marker() in common.MARKERS and labelled in str(line.get_label())]
    return {round(float(x), 9) for line in lines for x in line.get_xdata()}


def test_covariance_ratios_sit_at_relative_depth(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    tables = make_tables(1, ("resnet", "llama"))
    f1_covariance.fig_covariance(tables["covmats"], tables["covariance"], VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    for family in ("llama", "resnet"):  # one row each
        ax = next(ax for ax in seen[-1][0].axes if ax.get_title().endswith(f"{family}: measured vs null"))
        rows = tables["covariance"][tables["covariance"]["family"] == family]
        narrowest, widest = rows.sort_values(["width", "depth"]).iloc[[0, -1]]["model"]
        drawn = rows[rows["model"].isin([narrowest, widest])]
        assert _xs(ax, "depth") == {round(x, 9) for x in expected_relative_depth(drawn)}
        assert ax.get_xlabel().startswith("relative depth l/L")


def _errorbars(ax) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y and half bar length of every marker drawn with symmetric error bars on ``ax``."""
    xs, ys, halves = [], [], []
    for container in ax.containers:
        data, _, (bars, *_) = container.lines
        segments = np.array(bars.get_segments())  # (n, 2, 2): bottom and top of each bar
        xs.append(np.asarray(data.get_xdata(), float))
        ys.append(np.asarray(data.get_ydata(), float))
        halves.append((segments[:, 1, 1] - segments[:, 0, 1]) / 2)
    return tuple(np.concatenate(v) for v in (xs, ys, halves))


def test_expansion_plots_the_gain_with_bars_of_two_se_at_relative_depth(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    growth = make_tables(1, ("resnet", "llama"))["growth"]
    growth = growth.assign(gain_tokens_se=0.002 * (1 + np.arange(len(growth)) % 5))
    f7_expansion.fig_expansion(growth, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    table = growth[growth["snapshot"] == "final"]  # E8: the trained model's rows only
    fig, notes = seen[-1]
    axes = [ax for ax in fig.axes if ax.containers]
    assert len(axes) == 2 and not any("dropped" in note for note in notes)
    for ax in axes:
        part = table[table["family"] == ax.get_title().split(" / ")[1]]
        xs, ys, halves = _errorbars(ax)
        expected = sorted(zip(part["gain_tokens"].round(9), (2 * part["gain_tokens_se"]).round(9)))
        assert sorted(zip(ys.round(9), halves.round(9))) == expected  # each gain with its own ±2 SE
        depths = np.array(sorted(set(expected_relative_depth(part))))
        assert (np.abs(xs[:, None] - depths[None, :]).min(1) < 0.5 * np.diff(depths).min()).all()  # dodged only


def test_medians_are_drawn_only_where_their_intervals_exclude_the_null():
    frame = pd.DataFrame(
        {"x": [1, 1, 1, 2, 2, 2, 3, 3, 3], "y": [0.1, -0.2, 0.3, 1.0, 1.2, 0.9, 2.0, 2.1, 1.9]}
    ).assign(lo=lambda f: f["y"] - 0.5, hi=lambda f: f["y"] + 0.5)
    median = common.resolved_medians(frame, "x", "y", "lo", "hi")
    assert np.isnan(median[1]) and median[2] == 1.0 and median[3] == 2.0  # at x = 1 every interval holds 0
    fig = common.Figure()
    ax = fig.subplots()
    common._estimates(ax, frame.assign(level=1), "x", "y", "level", "level", lo="lo", hi="hi")
    [line] = [line for line in ax.lines if line.get_label() == "level 1"]
    drawn = np.asarray(line.get_ydata(), float)
    assert np.isnan(drawn[0]) and list(drawn[1:]) == [1.0, 2.0]  # the line starts at the first resolved median


def test_f3_frames_the_cells_within_noise_of_the_best():
    cells = pd.DataFrame({"test_loss": [1.0, 1.005, 1.05, 1.02], "se": [0.01, 0.01, 0.01, np.nan]})
    assert f3_rebound.near_best(cells).tolist() == [True, True, False, False]  # 2 SE = 0.028; 1 % of 1.0 alone
    assert f3_rebound.near_best(cells.assign(se=np.nan)).tolist() == [True, True, False, False]


def test_rows_without_a_known_number_of_points_are_dropped_with_a_note(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["growth"].query("snapshot == 'final'")
    pretrained = table.iloc[:2].assign(family="hf", depth=0, model="hf-tiny")
    f7_expansion.fig_expansion(pd.concat([table, pretrained]), VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    fig, notes = seen[-1]
    assert any("2 row(s)" in note and "relative_depth" in note for note in notes)
    assert all("hf" not in ax.get_title() for ax in fig.axes)


def test_heat_map_units_are_ordered_by_the_leading_eigenvector():
    units = 6
    matrix = np.full((units, units), 0.05)
    linked = [1, 3, 5]
    matrix[np.ix_(linked, linked)] = 0.9
    np.fill_diagonal(matrix, 1.0)
    ordered = f1_covariance._ordered(pd.DataFrame(matrix))
    assert sorted(ordered.index[:3]) == linked and list(ordered.index) == list(ordered.columns)


# -- depth trends (F2, F3) ---------------------------------------------------------------
@pytest.mark.parametrize("stem, table", [("F2_signal_decay", "signal"), ("F3_rebound", "training")])
def test_a_family_with_one_depth_is_left_out_with_a_note(stem, table, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    tables = make_tables(1, ("resnet", "llama"))
    draw = FIGURES[stem][0]
    frame = tables[table]
    frame = frame[(frame["family"] == "resnet") | (frame["depth"] == 8)]
    draw(*tables_of(stem, tables, **{table: frame}), tmp_path / "f.pdf", dpi=DPI)
    fig, notes = seen[-1]
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles and all("llama" not in t for t in titles)
    assert any("synth / llama has one depth (8)" in note for note in notes)
    llamas = frame[frame["family"] == "llama"]
    draw(*tables_of(stem, tables, **{table: llamas}), tmp_path / "g.pdf", dpi=DPI)  # nothing left: a placeholder
    assert_written(tmp_path / "g.pdf")


def test_signal_depth_axis_is_logarithmic_with_ticks_at_the_depths(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["signal"]
    f2_signal_decay.fig_signal(table, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    for ax in seen[-1][0].axes:
        assert ax.get_xscale() == "log"
        assert list(ax.get_xticks()) == sorted(table["depth"].unique())


def test_heat_map_labels_integer_widths_as_integers(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["training"]
    table = table.assign(width=table["width"].map({1: 0.5, 2: 64.0, 4: 128.0}).astype(float))
    f3_rebound.fig_rebound(table, powerlaw_table(table), VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    heat = next(ax for ax in seen[-1][0].axes if "best (solid)" in ax.get_title())
    assert [t.get_text() for t in heat.get_xticklabels()] == ["0.5", "64", "128"]


# -- F4, F5 ------------------------------------------------------------------------------
def test_infinite_estimates_are_drawn_on_the_top_edge(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["dalign"].copy()
    rows = table.index[(table["view"] == "full") & (table["split"] == "train")][:3]
    table.loc[rows, "d_par"] = np.inf
    f4_dalign_vs_width.fig_dalign(table, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    fig, notes = seen[-1]
    triangles = [
        line for ax in fig.axes for line in ax.lines if line.get_marker() == "^" and line.get_color() == "black"
    ]
    assert sum(len(line.get_xdata()) for line in triangles) == 3
    assert any("3 row(s) with d_par = +∞" in note for note in notes) and not any("dropped" in n for n in notes)


def test_misalignment_bounds_sit_below_the_top_and_its_ticks_are_level(tmp_path, monkeypatch):
    """F5: a bound at 1 is drawn under the axes' top edge, not on it; the M = K ticks are not rotated; the
    title is short and the key (line styles, markers) sits under the panels."""
    seen = _drawn(monkeypatch)
    table = make_tables(1, ("resnet", "llama"))["misalignment"].assign(b_align=1.0)
    f5_misalignment.fig_misalignment(table, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    fig = seen[-1][0]
    assert len(fig.get_suptitle()) < 100 and any("B_align" in label for label in _key(fig))
    for ax in fig.axes:
        assert ax.get_ylim()[1] > 1.05
        assert all(label.get_rotation() == 0 for label in ax.get_xticklabels())


# -- F6 ----------------------------------------------------------------------------------
def test_intervention_draws_one_marker_per_model_at_the_smallest_step(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1, ("resnet", "llama"))["intervention"]
    table = table.assign(ratio_heldout=table["ratio_heldout"] * (1 + table["point_index"]) * (1 + table["eta"]))
    f6_intervention.fig_intervention(table, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    fig = seen[-1][0]
    smallest = table[table["eta"] == table["eta"].min()]
    for column, pool in (("ratio_heldout", "held out"), ("ratio", "same pool")):
        expected = smallest.groupby(["family", "model", "view"])[column].median().sort_values()
        panels = [ax for ax in fig.axes if pool in ax.get_title()]
        drawn = np.sort(
            [y for ax in panels for line in ax.lines if line.get_marker() in common.MARKERS for y in line.get_ydata()]
        )
        assert len(drawn) == len(expected)  # one marker per model and view
        np.testing.assert_allclose(drawn, expected.to_numpy())
        assert all(any(line.get_ydata()[0] == 1 for line in ax.lines if line.get_label() == "ratio 1") for ax in panels)


def test_signed_axis_is_linear_to_a_power_of_ten():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    ax.plot([0, 1, 2, 3], [-3e-5, 2e-5, 0.4, 7.0])
    common._signed(ax, [-3e-5, 2e-5, 0.4, 7.0])
    linthresh = ax.yaxis.get_transform().linthresh
    assert linthresh == pytest.approx(1e-5) and ax.get_yscale() == "symlog"


def test_figure_tables_are_read_from_the_modules_without_the_plotting_stack() -> None:
    """``FIGURE_TABLES`` (the workflow's parse) states what each module's ``TABLES`` says, and
    reading it loads neither matplotlib nor seaborn."""
    assert scalemech.figures.FIGURE_TABLES == {stem: tables for stem, (_, tables) in FIGURES.items()}
    probe = (
        "import sys, scalemech.figures as f; f.FIGURE_TABLES; "
        "print(sorted(m for m in ('matplotlib', 'seaborn', 'torch') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_the_power_law_is_drawn_only_over_the_depths_measured_at_each_width(tmp_path, monkeypatch):
    """A cross (depths 8/14/20 at width 0.5, widths 1 and 1.5 at depth 8 only): one dotted fit curve,
    width 0.5's, in its measured line's colour, from depth 8 to 20; none where no model tests the law."""
    seen = _drawn(monkeypatch)
    cross = [(8, 0.5), (14, 0.5), (20, 0.5), (8, 1.0), (8, 1.5)]
    rows = [
        dict(run="t", dataset="synth", family="resnet", depth=d, width=w, seed=s, model=f"d{d}-w{w}-s{s}",
             test_loss=2 * (d / 8) ** -0.5 + (w / 0.5) ** -0.8 + 0.5 + 0.01 * s)
        for d, w in cross
        for s in range(3)
    ]  # fmt: skip
    training = pd.DataFrame(rows)
    fits = powerlaw_table(training)
    assert not fits.empty
    f3_rebound.fig_rebound(training, fits, VERDICTS, tmp_path / "f.pdf", dpi=DPI)
    lines = seen[-1][0].axes[0].lines
    curves = [line for line in lines if line.get_linestyle() == ":" and len(line.get_xdata()) == 100]
    assert len(curves) == 1 and (curves[0].get_xdata().min(), curves[0].get_xdata().max()) == (8, 20)
    assert curves[0].get_color() == common._style(0, 3)["color"]  # width 0.5's, the first of three


@pytest.mark.parametrize(
    "ticks, labels",
    [
        ([-1e-6, 0, 1e-6, 1e-4], ["$-10^{-6}$", "0", "$10^{-6}$", "$10^{-4}$"]),  # F2's axis before: 1e-06, 0.0001
        ([0.25, 0.5, 0.75], ["0.25", "0.5", "0.75"]),
        ([8, 512, 3072], ["8", "512", "3072"]),
        ([2e-4, 0.1, 30], ["$2\\times10^{-4}$", "$10^{-1}$", "$3\\times10^{1}$"]),
    ],
)
def test_every_tick_of_an_axis_takes_one_number_format(ticks, labels):
    formatter = common.OneFormat()
    formatter.set_locs(ticks)
    assert [formatter(tick) for tick in ticks] == labels


def test_each_figure_states_its_claims_verdicts_from_the_verdict_table(tables_dir, tmp_path, monkeypatch):
    """The verdict table's rows of a figure, in its regime where the table names one, under its panels:
    F5 shows W2's and W3's, in their verdicts' colours; a figure of no claim in the table, none."""
    seen = _drawn(monkeypatch)
    verdicts = VERDICTS.assign(regime="").copy()
    verdicts.loc[verdicts["claim"] == "W3", ["regime", "verdict"]] = ["trained", "refuted"]
    table = make_tables(1)["misalignment"]
    out = tmp_path / f"{f5_misalignment.STEM}.pdf"  # a figure is written under its stem, which picks its rows
    f5_misalignment.fig_misalignment(table, verdicts, out, dpi=DPI)
    texts = {t.get_text(): t for t in seen[-1][0].texts}
    assert "W2: confirmed: W2's deciding number 0.12 [0.05, 0.2]" in texts
    w3 = texts["W3 (trained): refuted: W3's deciding number 0.12 [0.05, 0.2]"]
    assert w3.get_color() == common.VERDICT_COLOURS["refuted"]
    f5_misalignment.fig_misalignment(table, verdicts.iloc[:0], out, dpi=DPI)
    assert not any(": confirmed:" in t.get_text() for t in seen[-1][0].texts)


def test_a_legend_over_the_data_moves_beside_its_panel(tmp_path):
    """A legend over points (centred in a panel they fill) covers some, as the layout check counts them;
    ``_save`` moves it beside the panel, where it covers none."""
    fig, axes = common._figure(1, 1)
    ax = axes[0, 0]
    x = np.linspace(0, 1, 40)
    for k in range(3):
        ax.plot(x, x + 0.05 * k, marker="o", label=f"line {k}")
    ax.legend(loc="center")
    common.FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    assert covered_points(ax, ax.get_legend().get_window_extent(fig.canvas.get_renderer())) > 0
    common._save(fig, tmp_path / "F0_test.pdf", "a panel full of points", [], DPI)
    assert_laid_out("F0_test", fig, VERDICTS)
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_a_segment_meets_a_box_as_dense_sampling_finds():
    """``common.crosses`` (Liang–Barsky) against 2001 points along each of 2000 random segments, points
    (length 0) and segments along an edge among them."""
    from matplotlib.transforms import Bbox

    rng = np.random.default_rng(0)
    box = Bbox([[0.3, 0.4], [0.6, 0.7]])
    starts, ends = rng.uniform(0, 1, (2000, 2)), rng.uniform(0, 1, (2000, 2))
    ends[:200] = starts[:200]  # markers
    starts[200:210], ends[200:210] = [0.3, 0.1], [0.3, 0.9]  # along the box's left edge: it meets the box
    along = starts[:, None, :] + np.linspace(0, 1, 2001)[None, :, None] * (ends - starts)[:, None, :]
    inside = (along >= [0.3, 0.4]) & (along <= [0.6, 0.7])
    sampled = inside.all(axis=2).any(axis=1)
    found = common.crosses(box, starts, ends)
    assert (found >= sampled).all() and found[200:210].all()
    assert (found != sampled).sum() <= 5  # segments that only graze a corner between two samples
