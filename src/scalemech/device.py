"""``--device auto|cpu|cuda``: one rule for every command and job."""

from __future__ import annotations

import torch

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | torch.device) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without a GPU is an error that says so."""
    if isinstance(device, torch.device):
        return device
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no GPU; use device: auto or cpu")
    return torch.device(device)
