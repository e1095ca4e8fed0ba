"""Figures F1–F11 of docs/science.md §5, one module per figure (``f1_covariance`` …), drawn from tidy
tables only; ``common`` holds what they share, ``aggregate`` and ``placement`` (E11's placement
strategies) what they share with the report.

Each ``fig_<name>(tables..., out)`` checks the columns it needs
(``scalemech.core.tables.check_columns``), drops rows with NaN (an estimate that is undefined:
counted in a note printed under the figure) and writes ``out`` as PDF and PNG with the same
stem. No finite value is dropped: estimates that can come out ≤ 0 (‖μ‖², d_align, loss
changes, ratios) sit on linear or symlog axes with a zero line, each insertion point's
estimate with its interval (``_estimates``); a marker is filled where the interval excludes
the null value (0; 1/2 for a misalignment probability) and open, with a grey bar, where it
does not ("not detectable"). Lines run through the median over all estimates, negative ones
included. Lines differ in colour (viridis, whose lightness rises monotonically, so it survives
grayscale printing), marker and line style. Per-point figures (F1, F7) place an insertion point
at its relative depth l/L (``relative_depth``), so models of different depths line up. A family
with a single depth shows no trend in depth: F2 and F3 leave it out and say so under the figure.
``FIGURES`` maps each figure's file stem to its function and the tables it reads, from the
``STEM``, ``draw`` and ``TABLES`` of each figure module (``figure_modules``: every ``f<k>_<name>``
of the package, by ``k``); it loads matplotlib and seaborn on first use (PEP 562).
``FIGURE_TABLES`` maps each stem to its tables as the modules' sources state them, without importing
them: the workflow's parse reads it, and so plans every figure without loading the plotting stack.
``make_figure`` draws one from a tables folder, importing its module only (a figure job loads neither
seaborn nor scipy unless its figure uses them).

F3 and F7 show per-model values: seeds aggregated by the mean (``over_seeds``); F6 one value per
model, the median over its insertion points with their range (``f6_intervention._per_model``).
References: matplotlib (Hunter 2007), seaborn (Waskom 2021).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from ..core.layout import table_path
from ..core.tables import read_table


def _module_names() -> list[str]:
    """The figure modules' names, ``f<k>_<name>``, by ``k``."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"f\d+_\w+", m.name)]
    return sorted(names, key=lambda name: int(name[1:].split("_")[0]))


def figure_modules() -> list[ModuleType]:
    """The figure modules of this package, ``f<k>_<name>``, by ``k``: each names its file ``STEM``, its
    ``TABLES`` and ``draw``."""
    return [importlib.import_module(f"{__name__}.{name}") for name in _module_names()]


def _declared(name: str) -> tuple[str, list[str]]:
    """``(STEM, TABLES)`` of figure module ``name``, the literals its source assigns."""
    tree = ast.parse(Path(__path__[0], f"{name}.py").read_text())
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("STEM", "TABLES")
    }  # fmt: skip
    return values["STEM"], list(values["TABLES"])


_DECLARED = {name: _declared(name) for name in _module_names()}  # module name -> (STEM, TABLES), one parse each
FIGURE_TABLES: dict[str, list[str]] = dict(_DECLARED.values())
_MODULE_OF: dict[str, str] = {stem: name for name, (stem, _) in _DECLARED.items()}  # stem -> module name


@cache
def _figures() -> dict[str, tuple[Callable[..., None], list[str]]]:
    return {m.STEM: (m.draw, m.TABLES) for m in figure_modules()}


def __getattr__(name: str) -> Any:
    if name != "FIGURES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _figures()


def make_figure(stem: str, tables_dir: str | Path, out_dir: str | Path, *, dpi: int | None = None) -> Path:
    """Draw figure ``stem`` from ``tables_dir/<table>.csv`` (covmats: ``.parquet``) into
    ``out_dir/<stem>.{pdf,png}`` at ``dpi`` (default ``common.DPI``); returns the PDF path."""
    from .common import DPI

    if stem not in FIGURE_TABLES:
        raise KeyError(f"unknown figure {stem!r}; known figures: {sorted(FIGURE_TABLES)}")
    module = importlib.import_module(f"{__name__}.{_MODULE_OF[stem]}")  # its module only: a job loads what it draws
    draw, tables = module.draw, module.TABLES
    frames = [read_table(table_path(tables_dir, table), table) for table in tables]
    out = Path(out_dir) / f"{stem}.pdf"
    draw(*frames, out, dpi=DPI if dpi is None else dpi)
    return out
