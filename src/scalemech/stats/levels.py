"""The confidence levels the tables state, in a module of their own (no torch) for the report."""

UCB_LEVEL = 0.95
"""One-sided level of the upper confidence bounds (``upper_bounds``, ``TwoSampleBounds``)."""
