"""Per-example activation gradients at insertion points: their capture in one forward and backward
pass, the on-disk pools that hold them, the first-order signal of a new block, and the BatchNorm
statistics recomputed before a measurement (``norms``)."""
