"""``--device auto|cpu|cuda``: one rule for every command and job."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

DEVICES = ("auto", "cpu", "cuda")


class DeviceError(RuntimeError):
    """The device asked for cannot be used here."""


def cuda_problem() -> str | None:
    """Why torch cannot compute on CUDA here, or None when it can (a tiny allocation succeeds)."""
    if not torch.cuda.is_available():
        built = torch.version.cuda
        return f"torch {torch.__version__} sees no usable GPU" + (
            f" (built for CUDA {built}: the driver may be missing or too old)" if built else " (a CPU-only build)"
        )
    try:
        torch.zeros(1, device="cuda")
    except RuntimeError as error:
        return f"torch cannot allocate on the GPU ({' '.join(str(error).split())[:160]})"
    return None


POOLS_SHARE = 0.5  # of a GPU's free memory that a measurement's gradient pools may stay in


def memory_for_pools(device: torch.device | str) -> int:
    """Bytes of gradient pools a measurement keeps on ``device`` rather than reading them back from their
    files: ``POOLS_SHARE`` of a GPU's free memory (the rest for the passes and the Grams); 0 on a CPU, whose
    files the page cache already holds and whose jobs' memory limits do not count them."""
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    return int(POOLS_SHARE * torch.cuda.mem_get_info(device)[0])


def resolve_device(device: str | torch.device, gpu_required: bool = False) -> torch.device:
    """``auto`` → CUDA when usable, else CPU; ``cuda``, or any device of a job that was given a GPU
    (``gpu_required``), fails at once with ``DeviceError`` when CUDA is not usable."""
    if isinstance(device, torch.device):
        return device
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if gpu_required and device == "cpu":
        raise DeviceError("this job was given a GPU (resources.gpu: 1) but device is cpu; set device: auto or cuda")
    if device == "cuda" or gpu_required:
        problem = cuda_problem()
        if problem:
            if gpu_required:
                raise DeviceError(
                    f"this job was given a GPU (resources.gpu: 1) but {problem}; use device: cpu, or "
                    "resources.gpu: 0 to run on CPUs"
                )
            raise DeviceError(f"device cuda was requested but {problem}; ask for device cpu (or auto) to run on CPUs")
        return torch.device("cuda")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextmanager
def placed(module: torch.nn.Module, device: torch.device) -> Iterator[torch.nn.Module]:
    """``module`` moved to ``device`` for the block, then back where its parameters were (the host, for a
    model that waits there while another one computes): the device holds one model at a time."""
    home = next(module.parameters()).device
    module.to(device)
    try:
        yield module
    finally:
        module.to(home)


# -- CUDA numerics ------------------------------------------------------------------------------
@contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """fp32 matrix products and convolutions on CUDA in TF32 (inputs rounded to a 10-bit mantissa,
    fp32 accumulation) when ``enabled``, in IEEE fp32 otherwise; the previous settings restored after."""
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    previous = matmul.fp32_precision, conv.fp32_precision
    matmul.fp32_precision = conv.fp32_precision = "tf32" if enabled else "ieee"
    try:
        yield
    finally:
        matmul.fp32_precision, conv.fp32_precision = previous


def set_training_numerics(deterministic: bool = False) -> None:
    """Training's CUDA settings, for the process: TF32 for the fp32 operations bf16 autocast leaves
    (gradient clipping, the optimizer's products), cuDNN's autotuner picking each convolution's fastest
    algorithm (``benchmark``) unless ``deterministic`` (then cuDNN's deterministic algorithms only)."""
    torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.backends.cudnn.benchmark = not deterministic
    torch.backends.cudnn.deterministic = deterministic


def numerics() -> dict[str, object]:
    """The flags CUDA computes under, by name (what ``make gpu-check``'s ENV line prints)."""
    return {
        "matmul_fp32": torch.backends.cuda.matmul.fp32_precision,
        "conv_fp32": torch.backends.cudnn.conv.fp32_precision,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
