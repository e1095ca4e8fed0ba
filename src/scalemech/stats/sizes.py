"""The sizes a certificate needs (no torch): one check for ``certify``, ``grow``, ``certify_model``
and the config's ``grow.certificate``."""

from __future__ import annotations

from collections.abc import Callable

MIN_POOL = 5
"""The fewest examples per pool: the delete-one jackknife intervals need ``n >= 5``."""
MIN_BLOCK_SIZE = 2
"""The fewest tokens per example of a language model (``--block-size``), in every message."""


def certificate_size_problems(pool: int, M: int, K: int, name: Callable[[str], str] = "{} =".format) -> list[str]:
    """What is wrong with a certificate's ``pool``, ``M`` and ``K`` (``pool >= MIN_POOL``, ``1 <= M, K <=
    pool``: ``M`` train and ``K`` test examples are drawn from pools of ``pool``), one line each naming
    the value as ``name(key)`` writes it (``"M ="``, ``"grow.certificate.M:"``) and what is allowed."""
    problems = [
        f"{name(key)} {value} must be at least {low}"
        for key, value, low in (("pool", pool, MIN_POOL), ("M", M, 1), ("K", K, 1))
        if value < low
    ]
    problems += [
        f"{name(key)} {value} is more than the {pool} examples of each pool measured; allowed: 1 <= {key} <= {pool}"
        for key, value in (("M", M), ("K", K))
        if value > pool
    ]
    return problems


POOL, M, K = 256, 16, 16
"""The certificate's default sizes, shared by ``certify`` and ``grow`` (one point's verdict must not
depend on which command measured it)."""
