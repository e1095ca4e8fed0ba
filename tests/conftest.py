"""Shared test settings: one torch thread (tiny models run faster, and results are stable)."""

import torch

torch.set_num_threads(1)
