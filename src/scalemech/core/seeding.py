"""Seeds of a job's random draws, derived from the config's seed and what each draw is for.

Every random draw of a job (the examples of a pool, a new block's initial weights, the
subsets of the misalignment draws, the null permutations) uses its own generator seeded by
``derive_seed(seed, *identity)``, where ``identity`` names the model and the purpose, e.g.
``("mnist5k/resnet-d8-w1-s0", "stage2.block1", "new_block")``. So a job's numbers depend on
the config alone, never on what ran before it in the process, and different models and points
get independent draws. torch is imported by ``seeded`` alone, so the report and the figures derive
seeds without loading it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any


def derive_seed(seed: int, *identity: object) -> int:
    """A 63-bit seed: the first 8 bytes of ``sha256(repr((seed, *identity)))``, top bit cleared."""
    digest = hashlib.sha256(repr((int(seed), *map(str, identity))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def model_identity(keys: dict[str, Any]) -> str:
    """``<dataset>/<model>`` from a job's table keys (just ``<model>`` where no dataset is named)."""
    return f"{keys['dataset']}/{keys['model']}" if "dataset" in keys else str(keys["model"])


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's global CPU generator seeded by ``seed``; restore it afterwards.

    For code that draws from the global generator (module initialization in ``new_block``)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
