"""Training batches: the same draws as a draw per step, and one host-device transfer per epoch (images) or per
``STEPS_AHEAD`` steps (text), counted on the CPU as the calls that would synchronize on CUDA."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from scalemech.data import Prepared
from scalemech.tasks.images import ImageBatches, ImageTask, crop_flip
from scalemech.tasks.windows import STEPS_AHEAD, TextBatches, text_windows


def transfers(func, args: tuple, kwargs: dict, result) -> bool:
    """Whether a call copies between host and device, or reads a value back, when the data live on CUDA: a
    value read (``item``, ``tolist``), a tensor built from Python data, or a move to a named device that made
    a copy (on the CPU a move to the same device returns the tensor itself, as it does on CUDA for a tensor
    already there)."""
    if func in (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.cuda):
        return True
    if func in (torch.tensor, torch.as_tensor):
        return not isinstance(args[0], torch.Tensor)
    if func is torch.Tensor.to:
        named = "device" in kwargs or any(isinstance(a, (torch.device, str)) for a in args[1:])
        return named and result is not args[0]
    return False


class CountTransfers(TorchFunctionMode):
    """Counts the calls that would synchronize with the host on CUDA (``transfers``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        self.count += transfers(func, args, kwargs, result)
        return result


def images(n: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8, generator=generator), torch.arange(n) % 10


def per_step_images(x, y, batch_size, seed, steps):
    """The batches drawn step by step: a permutation at each epoch's start, then each batch's crops and flips."""
    generator, spe, out = torch.Generator().manual_seed(seed), len(x) // batch_size, []
    for step in range(steps):
        k = step % spe
        if k == 0:
            order = torch.randperm(len(x), generator=generator)
        index = order[k * batch_size : (k + 1) * batch_size]
        shifts = torch.randint(0, 9, (batch_size, 2), generator=generator)
        flips = torch.rand(batch_size, generator=generator) < 0.5
        out.append((crop_flip(x[index], shifts, flips, 4), y[index]))
    return out


def test_image_batches_draw_as_per_step_and_resume():
    x, y = images()
    expected = per_step_images(x, y, 16, seed=3, steps=20)  # 6 steps an epoch: 3 epochs and a bit
    batches = ImageBatches(x, y, 16, torch.Generator().manual_seed(3), "crop_flip")
    for step in range(8):
        got = batches.batch(step)
        assert torch.equal(got[0], expected[step][0]) and torch.equal(got[1], expected[step][1])
    state, generator_state = batches.state_dict(), batches.generator.get_state()
    resumed = ImageBatches(x, y, 16, torch.Generator().set_state(generator_state), "crop_flip")
    resumed.load_state_dict(state)
    for step in range(8, 20):
        got = resumed.batch(step)
        assert torch.equal(got[0], expected[step][0]) and torch.equal(got[1], expected[step][1])


def test_text_batches_draw_as_per_step_and_resume():
    stream = torch.randint(0, 256, (5000,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(4)
    steps = 2 * STEPS_AHEAD + 7
    expected = [
        text_windows(stream, torch.randint(0, len(stream) - 32, (4,), generator=generator), 32) for _ in range(steps)
    ]
    batches = TextBatches(stream, 4, 32, torch.Generator().manual_seed(4))
    cut = STEPS_AHEAD + 3
    for step in range(cut):
        assert all(torch.equal(a, b) for a, b in zip(batches.batch(step), expected[step]))
    resumed = TextBatches(stream, 4, 32, torch.Generator().set_state(batches.generator.get_state()))
    resumed.load_state_dict(batches.state_dict())
    for step in range(cut, steps):
        assert all(torch.equal(a, b) for a, b in zip(resumed.batch(step), expected[step]))


def test_transfers_per_step():
    """The data live on the ``meta`` device, standing for CUDA: a copy from the host is a real move there."""
    x, y = images(640)  # 10 steps of 64 an epoch
    x, y = x.to("meta"), y.to("meta")
    data = Prepared("toy", "image", x, y, x[:10], y[:10], {"stats": {"mean": [0.5] * 3, "std": [0.25] * 3}},
                    num_classes=10, in_channels=3, image_size=8)  # fmt: skip
    task, batches = ImageTask(data), ImageBatches(x, y, 64, torch.Generator().manual_seed(0), "crop_flip")
    with CountTransfers() as counter:
        for step in range(100):
            task.to_input(batches.batch(step)[0])
    assert counter.count == 10 * 3 + 2  # per epoch: the permutation, the shifts, the flips; the stats once
    stream = torch.randint(0, 256, (5000,), dtype=torch.uint8).to("meta")
    text = TextBatches(stream, 4, 32, torch.Generator().manual_seed(0))
    with CountTransfers() as counter:
        for step in range(2 * STEPS_AHEAD):
            text.batch(step)
    assert counter.count == 2
