"""Every family a grid may train, from ``models.FAMILIES`` (tests over every family keep no list of their
own), and the depths each one's config accepts."""

from __future__ import annotations

from scalemech.models import FAMILIES, family_config

TRAINED = [name for name, family in FAMILIES.items() if family.trained]


def accepted_depths(family: str, deepest: int = 60) -> list[int]:
    """The depths up to ``deepest`` that ``family``'s config accepts at its defaults."""
    accepted = []
    for depth in range(1, deepest + 1):
        try:
            family_config(family)(depth=depth)
        except ValueError:
            continue
        accepted.append(depth)
    return accepted
