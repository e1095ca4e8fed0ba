"""Shared test settings: one torch thread (tiny models run faster, and results are stable), and
the tests that run Snakemake first.

``make test`` runs on every core with pytest-xdist, ``--dist loadfile --no-loadscope-reorder``:
each file on one worker (its module fixtures built once), files handed out in collection order.
The files marked ``workflow`` are the longest, so they are collected first and the suite does
not end waiting on one of them."""

import pytest
import torch

torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("workflow") is None)  # stable: file order kept
