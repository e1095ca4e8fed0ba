"""Gradient capture at all insertion points of a ResNet-20: one backward vs one per point.

``grads.activation_grads`` gets ``q`` at every point from one forward and one backward per batch;
the baseline runs a forward and a backward for each point separately. Batch of CIFAR-shaped
random images, BatchNorm in eval mode; prints seconds per batch and the ratio.
"""

import time

import torch

from scalemech.gradients.capture import activation_grads
from scalemech.models import build_model

BATCH, REPEATS = 64, 3


def timed(fn) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(REPEATS):
        fn()
    return (time.perf_counter() - start) / REPEATS


def main() -> None:
    torch.manual_seed(0)
    model = build_model({"family": "resnet", "depth": 20, "width": 1.0, "in_channels": 3, "num_classes": 10}).eval()
    x, y = torch.randn(BATCH, 3, 32, 32), torch.randint(0, 10, (BATCH,))
    points = model.insertion_points()
    one_pass = timed(lambda: activation_grads(model, x, y, points))
    per_point = timed(lambda: [activation_grads(model, x, y, [p]) for p in points])
    print(
        f"ResNet-20, {len(points)} points, batch {BATCH}, {torch.get_num_threads()} threads: "
        f"one pass {one_pass:.3f} s, one backward per point {per_point:.3f} s, ratio {per_point / one_pass:.1f}x"
    )


if __name__ == "__main__":
    main()
