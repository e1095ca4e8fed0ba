"""The README block a benchmark writes with ``--readme``: the machine, the date, the command and the result.

A block sits between ``<!-- results:<name>:start -->`` and ``<!-- results:<name>:end -->``
(``scalemech.pipeline.readme.markers``); ``check_block`` refuses a file without them before the
benchmark runs, ``write_block`` rewrites the block once it has its result.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import torch

from scalemech.core.machine import cpu_model
from scalemech.pipeline.readme import markers, replace_block


def check_block(readme: Path, name: str) -> None:
    """``ValueError`` (``FileNotFoundError`` for a missing file) unless ``readme`` holds ``name``'s
    start marker followed by its end marker."""
    start, end = markers(name)
    text = readme.read_text()
    if start not in text or end not in text or text.index(start) > text.index(end):
        raise ValueError(f"{readme} has no {start} … {end} block to rewrite; add those two lines where the result goes")


def machine_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model and core count."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"{cpu_model()}, {os.cpu_count()} cores"


def readme_block(name: str, result: str, device: torch.device) -> str:
    """The README's ``name`` block: the machine, the date, the command that ran (this script with its
    arguments) and ``result``."""
    start, end = markers(name)
    command = " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    return "\n".join(
        [start, f"On {machine_name(device)}, {datetime.now(UTC):%Y-%m-%d}, `{command}`:", "", "```", result, "```", end]
    )


def write_block(readme: Path, name: str, result: str, device: torch.device) -> None:
    """Rewrite ``readme``'s ``name`` block with ``result`` (``readme_block``)."""
    replace_block(readme, name, readme_block(name, result, device))
