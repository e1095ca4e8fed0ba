"""A play in tinyshakespeare's on-disk format (speaker lines, verse, blank lines between turns),
written by the tests instead of reading the real corpus, which a user's clone does not have."""

from __future__ import annotations

import random

SPEAKERS = ("First Citizen", "MENENIUS", "CORIOLANUS", "VOLUMNIA", "Second Citizen")
WORDS = "the a of to and my thy lord good what will not is you speak know hath more love king night".split()


def play_text(chars: int, seed: int = 0) -> str:
    """At least ``chars`` characters of seeded dialogue: ``SPEAKER:\\n`` then 1-3 lines of verse."""
    draw = random.Random(seed)
    turns, size = [], 0
    while size < chars:
        verse = [" ".join(draw.choices(WORDS, k=draw.randint(4, 9))) for _ in range(draw.randint(1, 3))]
        lines = [line.capitalize() + "." for line in verse]
        turns.append(f"{draw.choice(SPEAKERS)}:\n" + "\n".join(lines) + "\n\n")
        size += len(turns[-1])
    return "".join(turns)
