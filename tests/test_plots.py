"""Figures F1–F7: each draws a PDF and a PNG from synthetic tidy tables, names a missing column,
keeps negative estimates, and draws estimates whose interval contains the null in open markers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread
from test_report import make_tables, write_contract_table

from scalemech import plots
from scalemech.plots import FIGURES, choose, default_mk, make_figure

DPI = 40
NEEDED = {  # one column each figure cannot do without, besides the model keys
    "F1_covariance": ("covariance", "low_rank"),
    "F2_signal_decay": ("signal", "mu_sq_lo"),
    "F3_rebound": ("training", "test_loss"),
    "F4_dalign_vs_width": ("dalign", "d_align_hi"),
    "F5_misalignment": ("misalignment", "b_align"),
    "F6_intervention": ("intervention", "sign_agree_heldout"),
    "F7_expansion": ("expansion", "fallback"),
    "F8_dalign_over_training": ("trajectory", "d_align_lo"),
}


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
    return folder


@pytest.mark.parametrize("stem", FIGURES)
def test_make_figure_writes_pdf_and_png(stem, tables_dir, tmp_path):
    assert_written(make_figure(stem, tables_dir, tmp_path / "figures", dpi=DPI))


@pytest.mark.parametrize("stem", FIGURES)
@pytest.mark.parametrize("column", ["width", "needed"])
def test_missing_column_is_named(stem, column, tmp_path):
    draw, names = FIGURES[stem]
    table, needed = NEEDED[stem]
    column = needed if column == "needed" else column
    frames = [make_tables(1)[name] for name in names]
    frames[names.index(table)] = frames[names.index(table)].drop(columns=column)
    with pytest.raises(ValueError, match=column):
        draw(*frames, tmp_path / "f.pdf", dpi=DPI)


def test_unknown_figure_is_named():
    with pytest.raises(KeyError, match="F9_nothing"):
        make_figure("F9_nothing", ".", ".")


def _drawn(monkeypatch) -> list:
    """Record (figure, notes) of every figure saved while the test runs."""
    seen = []
    save = plots._save
    monkeypatch.setattr(
        plots,
        "_save",
        lambda fig, out, title, notes, dpi: (seen.append((fig, list(notes))), save(fig, out, title, notes, dpi)),
    )
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
    ],
)
def test_nan_rows_are_dropped_with_a_note(stem, table, column, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    frame = make_tables(1)[table].copy()
    frame.loc[frame.index[::5], column] = np.nan
    FIGURES[stem][0](
        *[frame if name == table else make_tables(1)[name] for name in FIGURES[stem][1]], tmp_path / "f.pdf", dpi=DPI
    )
    assert_written(tmp_path / "f.pdf")
    assert any(column in note and "dropped" in note for note in seen[-1][1])


@pytest.mark.parametrize(
    "stem, table, column",
    [
        ("F2_signal_decay", "signal", "mu_sq"),
        ("F4_dalign_vs_width", "dalign", "d_align"),
        ("F6_intervention", "intervention", "observed_heldout"),
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
    FIGURES[stem][0](frame, tmp_path / "f.pdf", dpi=DPI)
    fig, notes = seen[-1]
    assert np.isclose(_plotted(fig), -0.0123).any()
    assert not any(column in note for note in notes)
    if f"{column}_lo" in frame:  # not detectable: drawn as an open marker
        assert np.isclose(_plotted(fig, open_markers=True), -0.0123).any()
        assert not np.isclose(_plotted(fig, open_markers=True), frame.loc[second, column]).any()


def test_low_rank_points_are_marked(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    tables = make_tables(1)
    plots.fig_covariance(tables["covmats"], tables["covariance"], tmp_path / "f.pdf", dpi=DPI)
    labels = [text.get_text() for ax in seen[-1][0].axes if ax.get_legend() for text in ax.get_legend().get_texts()]
    assert any("low-rank" in label for label in labels)
    unmarked = tables["covariance"].assign(low_rank=False)
    plots.fig_covariance(tables["covmats"], unmarked, tmp_path / "f.pdf", dpi=DPI)
    labels = [text.get_text() for ax in seen[-1][0].axes if ax.get_legend() for text in ax.get_legend().get_texts()]
    assert not any("low-rank" in label for label in labels)


def test_misalignment_draws_both_certificates_and_counts_missing_ones(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["misalignment"]
    table = table.assign(b_exact=np.where(table["point_index"] == 0, np.nan, table["b_exact"]))
    plots.fig_misalignment(table, tmp_path / "f.pdf", M=64, K=64, dpi=DPI)
    fig, notes = seen[-1]
    assert any("48 row(s) without a B_exact (two-sample) certificate" in note for note in notes)
    fixed = table[(table["M"] == 64) & (table["K"] == 64)]
    medians = fixed.groupby(["depth", "width"])["b_exact"].median().to_numpy()
    assert np.isclose(_plotted(fig)[:, None], medians[None, :]).any(axis=0).all()


def test_intervention_shows_the_held_out_ratio_beside_the_same_pool_one(tmp_path, monkeypatch):
    seen = _drawn(monkeypatch)
    table = make_tables(1)["intervention"]
    plots.fig_intervention(table, tmp_path / "f.pdf", dpi=DPI)
    titles = [ax.get_title() for ax in seen[-1][0].axes]
    assert any("same pool" in t for t in titles) and any(t.endswith("held out") for t in titles)
    assert np.isclose(_plotted(seen[-1][0])[:, None], table["ratio_heldout"].unique()[None, :]).any(axis=0).all()


@pytest.mark.parametrize("stem", FIGURES)
def test_empty_tables_give_a_placeholder(stem, tmp_path):
    draw, names = FIGURES[stem]
    draw(*[make_tables(1)[name].iloc[:0] for name in names], tmp_path / "f.pdf", dpi=DPI)
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
    plots.fig_misalignment(table, tmp_path / "f5.pdf", M=16, K=64, dpi=DPI)
    assert_written(tmp_path / "f5.pdf")


def test_aggregates_match_a_direct_computation():
    signal = make_tables(1)["signal"]
    per_model = plots.over_points(signal, ["mu_sq"], by=["split"])
    one = signal[(signal["model"] == "resnet-d14-w2-s0") & (signal["split"] == "test")]
    got = per_model[(per_model["model"] == "resnet-d14-w2-s0") & (per_model["split"] == "test")]["mu_sq"]
    assert got.item() == pytest.approx(np.median(one["mu_sq"]))
    test = signal[signal["split"] == "test"]
    two_seeds = pd.concat([test, test.assign(seed=1, mu_sq=3 * test["mu_sq"])])
    grid = plots.over_seeds(plots.over_points(two_seeds, ["mu_sq"]), ["mu_sq"])
    cell = grid[(grid["depth"] == 14) & (grid["width"] == 2)]["mu_sq"].item()
    assert cell == pytest.approx(2 * np.median(one["mu_sq"]))  # mean of median and 3 × median


def test_a_requested_split_or_view_that_is_absent_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"split='valid'.*\['test', 'train'\]"):
        plots.fig_signal(make_tables(1)["signal"], tmp_path / "f.pdf", split="valid", dpi=DPI)
    with pytest.raises(ValueError, match=r"view='conv'"):
        plots.fig_dalign(make_tables(1)["dalign"], tmp_path / "f.pdf", view="conv", dpi=DPI)
