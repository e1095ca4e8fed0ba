"""What differs between image and text tasks, in one package.

``base``: the ``Task`` interface, ``task_for`` and fixed ``Examples``; ``images``: image
classification; ``windows``: windows of one token stream per split (byte-level text);
``tokens``: the token streams of a pretrained checkpoint.

A task wraps a prepared dataset and says

- which spec keys the data decide (``spec_keys``: channels and classes, or the vocabulary),
- how fixed examples are drawn (``draw``: one index per example, an image's position in its
  split or a window's start in its stream; seeded, so a pool is ``(split, index)``) and fetched
  as model input (``examples``),
- how a stored batch on the device becomes model input (``to_input``: image normalization with
  the train statistics, or token ids as int64),
- how training batches are drawn (``batches``: shuffled epochs with crop+flip for images,
  random windows for text) and what a training example is worth in tokens.

``task_for(data, block_size)`` is the only place that reads ``data.kind``. Training,
measurement and the model interface (``ResidualModel.task``) use nothing else. The
per-example loss stays with the model (its output decides the reduction).
"""

from .base import Examples, Pair, Task, draw_disjoint, draw_examples, fetch, task_for

__all__ = ["Examples", "Pair", "Task", "draw_disjoint", "draw_examples", "fetch", "task_for"]
