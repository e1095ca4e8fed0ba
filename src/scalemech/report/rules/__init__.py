"""The claims' rules: one module per claim (``d1`` … ``w5``, E8's ``e8``, E11's ``g1`` … ``g3``, E12's ``g4``,
``g5`` and ``g6``; W2 and W3 share ``misalignment``, their statistic's module). Adding a claim is adding a module
here that assigns its ``common.Claim`` (with the figure that shows it) and ``READS``, the columns its rule
reads by table.

``CLAIM_TABLES``: the tables the claims read, and ``training`` (the training criterion decides which models
every claim rests on), from the modules' sources without importing them: the workflow's parse reads it, so
it plans the report without loading statsmodels. A module whose tables are all measured again at an early
snapshot (``core.tables.early_tables``) reads their ``early_<table>`` too (``report.regimes``).
``claim_modules`` imports them (``verdicts.CLAIMS``).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from ...core.tables import EARLY, early_tables


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__))


def claim_modules() -> list[ModuleType]:
    """The claim modules of this package, by name."""
    return [importlib.import_module(f"{__name__}.{name}") for name in _module_names()]


def read_tables(name: str) -> set[str]:
    """The tables module ``name`` reads: the keys of the ``READS`` its source assigns (literal strings)."""
    path = Path(__path__[0], f"{name}.py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "READS" for t in node.targets):
            keys = node.value.keys if isinstance(node.value, ast.Dict) else [None]
            if not all(isinstance(key, ast.Constant) and isinstance(key.value, str) for key in keys):
                raise TypeError(f"{path}: READS must be a dict whose keys are table names written as strings")
            return {key.value for key in keys}
    raise TypeError(f"{path} assigns no READS (table → the columns its rule reads)")


def _with_early(names: set[str]) -> set[str]:
    """``names`` and, where every one of them is measured again early, their ``early_<table>``."""
    early = {EARLY + name for name in names}
    return names | early if early <= set(early_tables()) else names


CLAIM_TABLES: list[str] = sorted({"training"}.union(*(_with_early(read_tables(name)) for name in _module_names())))
