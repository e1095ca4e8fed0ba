"""Figures F1–F7: each draws a PDF and a PNG from synthetic tidy tables, and names a missing column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from scalemech import plots
from scalemech.plots import FIGURES, choose, default_mk, make_figure, table_path
from scalemech.tables import write_table
from test_report import make_tables

DPI = 40
NEEDED = {  # one column each figure cannot do without, besides the model keys
    "F1_covariance": ("covmats", "corr"),
    "F2_signal_decay": ("signal", "mu_sq"),
    "F3_rebound": ("training", "test_loss"),
    "F4_dalign_vs_width": ("dalign", "d_align_hi"),
    "F5_misalignment": ("misalignment", "b_align"),
    "F6_intervention": ("intervention", "sign_agree"),
    "F7_expansion": ("expansion", "fallback"),
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
            write_table(frame, table_path(folder, name), name)
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


@pytest.mark.parametrize("stem, table, column", [("F2_signal_decay", "signal", "mu_sq"),
                                                  ("F3_rebound", "training", "test_loss"),
                                                  ("F4_dalign_vs_width", "dalign", "d_align"),
                                                  ("F6_intervention", "intervention", "ratio")])
def test_nan_and_nonpositive_rows_are_dropped_with_a_note(stem, table, column, tmp_path, monkeypatch):
    notes_seen = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, out, title, notes, dpi: (notes_seen.extend(notes),
                                                                            save(fig, out, title, notes, dpi)))
    frame = make_tables(1)[table].copy()
    frame.loc[frame.index[::5], column] = np.nan
    frame.loc[frame.index[1::7], column] = -1.0  # dropped where the axis is logarithmic
    FIGURES[stem][0](frame, tmp_path / "f.pdf", dpi=DPI)
    assert_written(tmp_path / "f.pdf")
    assert any(column in note and "dropped" in note for note in notes_seen)


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
    assert choose(table, "stats_split", None) == "test"
    with pytest.raises(ValueError, match=r"view='pooled'.*\['full'\]"):
        choose(table, "view", "pooled")


def test_misalignment_at_explicit_mk(tmp_path):
    table = make_tables(1)["misalignment"]
    plots.fig_misalignment(table, tmp_path / "f5.pdf", M=16, K=64, stats_split="train", dpi=DPI)
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
