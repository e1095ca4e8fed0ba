"""How much memory ``scalemech grow`` needs at the scale of LLaMA-2, by arithmetic.

``grow`` trains in float32 (the checkpoint is written back in its own dtype) with AdamW, so an arm
holds ``4·N`` bytes of weights for its ``N`` parameters and, for its ``n`` trainable ones, ``4·n`` of
gradients and ``8·n`` of AdamW's two moments:

    bytes(arm) = 4·N + 12·n            (activations excluded: they scale with batch × block size)

The device holds one model at a time (``core.device.placed``): the arm in training, or a whole model,
frozen, while it is certified, checked, scored or its step's FLOPs counted (one window, gradients
dropped as counted). Sharded over ``G`` devices (``grow --shard``, FSDP2) an arm in training takes
``bytes(arm) / G`` on each, but every device still scores the whole model, so

    per device(arm, G) = max(bytes(arm) / G, 4·N)

The models wait on the host: the old and the grown model, and the arm in training's copy, ``4·N``
each, in every process; the main process also keeps the finished arms until the decision.

The parameter counts are those of a LLaMA decoder (``layer_params``: attention ``4·d²`` with as many
key/value heads as heads, the gated MLP ``3·d·f``, two norms ``2·d``); the arms are ``grow``'s:
``grown`` (LLaMA-Pro's every-4th copies, the new layers trained), ``full`` (``full_tokens``/
``full_flops``: every weight of the old model), ``inplace`` (as many old layers trained in place) and
``lora`` (PEFT LoRA on every linear layer of the old model at the rank whose adapters hold as many
parameters as the new layers).

``certify``'s capture carries, per point of a pass, a new layer (a float32 copy of the layer there,
``4·L``), the float32 gradient of its output projections (``o_proj`` and ``down_proj``,
``P = d² + d·f`` parameters) and their float64 sum over the pool (``8·P``), beside the model:

    certify(points) = 4·N + points · (4·L + 12·P)      (``--points-per-pass`` bounds ``points``)

and it stores ``pool`` per-example gradients per split as float32 rows of ``D = T·d`` (view ``full``;
``d`` with ``--view pooled``) on disk: ``2·pool·D·4`` bytes per point of a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTIVATION_FLOATS = 34
"""float32 values kept per token, hidden unit and layer for the backward pass (attention, MLP, norms;
Korthikanti et al. 2022 count about 34 half-precision bytes, taken here as floats: an upper estimate)."""
H200_BYTES = 141e9
"""One H200's memory (141 GB of HBM3e); a phase "fits" when its weights, gradients and optimizer states
use at most 90 % of it, the rest left to activations."""
FITS = 0.9
DEVICES = (2, 4, 8)
"""The device counts of the table's sharded columns (one node's GPUs)."""


@dataclass(frozen=True)
class Decoder:
    """A LLaMA decoder's sizes: ``d`` hidden, ``f`` MLP, ``layers``, ``vocab`` (input and output
    embeddings untied)."""

    name: str
    d: int
    f: int
    layers: int
    vocab: int = 32000

    def layer_params(self) -> int:
        """``4·d² + 3·d·f + 2·d``: attention, gated MLP, two RMS norms."""
        return 4 * self.d**2 + 3 * self.d * self.f + 2 * self.d

    def output_params(self) -> int:
        """``d² + d·f``: a layer's output projections (``o_proj``, ``down_proj``), the first-order ones."""
        return self.d**2 + self.d * self.f

    def params(self, layers: int | None = None) -> int:
        """Every parameter with ``layers`` decoder layers: the layers, two embeddings, the final norm."""
        return (self.layers if layers is None else layers) * self.layer_params() + 2 * self.vocab * self.d + self.d

    def lora_params_per_rank(self) -> int:
        """LoRA's parameters per unit of rank on every linear layer: ``r·(in + out)`` for q, k, v, o
        (``d → d``), gate and up (``d → f``) and down (``f → d``), in every layer."""
        return self.layers * (4 * 2 * self.d + 3 * (self.d + self.f))


LLAMA_2 = (Decoder("LLaMA-2-7B", 4096, 11008, 32), Decoder("LLaMA-2-13B", 5120, 13824, 40))
EVERY = 4  # LLaMA-Pro's stride: a copy after every 4th layer


def arm_bytes(params: int, trainable: int) -> int:
    """``4·N + 12·n`` (module doc)."""
    return 4 * params + 12 * trainable


def activation_bytes(d: int, layers: int, vocab: int, tokens: int, recompute: bool = False) -> int:
    """``4·tokens·(ACTIVATION_FLOATS·d·layers + 3·vocab)``: what the backward keeps of ``tokens`` tokens, and
    their logits with a float32 copy and gradient (``grow``'s check before it loads, ``grow.checks``).
    ``recompute`` (activation checkpointing): each layer keeps its input only, ``d`` floats a token, and
    one layer's are rebuilt at a time: ``4·tokens·(d·layers + ACTIVATION_FLOATS·d + 3·vocab)``."""
    kept = d * layers + ACTIVATION_FLOATS * d if recompute else ACTIVATION_FLOATS * d * layers
    return 4 * tokens * (kept + 3 * vocab)


def per_device(params: int, trainable: int, devices: int) -> float:
    """``max(bytes(arm) / G, 4·N)``: the arm's shard in training, or the whole model scored (module doc)."""
    return max(arm_bytes(params, trainable) / devices, 4 * params)


def arms(model: Decoder) -> dict[str, tuple[int, int]]:
    """``{arm: (parameters, trainable parameters)}`` of ``grow``'s arms on ``model`` grown LLaMA-Pro's way."""
    new = model.layers // EVERY
    new_params = new * model.layer_params()
    rank = round(new_params / model.lora_params_per_rank())
    adapters = rank * model.lora_params_per_rank()
    return {
        "grown (new layers)": (model.params(model.layers + new), new_params),
        "full (full_tokens, full_flops)": (model.params(), model.params()),
        "inplace": (model.params(), new_params),
        f"lora (rank {rank})": (model.params() + adapters, adapters),
    }


def point_bytes(model: Decoder) -> int:
    """``4·L + 12·P``: what one point of a capture pass adds on the device (module doc)."""
    return 4 * model.layer_params() + 12 * model.output_params()


def certify_bytes(model: Decoder, points: int) -> int:
    """``4·N + points·(4·L + 12·P)``: certify's device memory with ``points`` in a pass (module doc)."""
    return 4 * model.params() + points * point_bytes(model)


def points_that_fit(model: Decoder, limit: float = FITS * H200_BYTES) -> int:
    """The most points one capture pass can carry within ``limit`` bytes (0: not even one)."""
    return max(0, int((limit - 4 * model.params()) // point_bytes(model)))


def capture_bytes(pool: int, block_size: int, d: int, view: str = "full") -> int:
    """``certify``'s scratch space per point: ``2·pool·D·4`` with ``D = T·d`` (full) or ``d`` (pooled)."""
    return 2 * pool * (block_size * d if view == "full" else d) * 4


def host_bytes(model: Decoder) -> tuple[int, int]:
    """``(every process, the main process's finished arms)``: the old and grown models and the largest arm
    in training's copy, ``4·N`` each; the four finished arms besides the grown one (the two controls,
    ``inplace``, ``lora`` merged: the old model's size each)."""
    sizes = arms(model)
    grown, old = sizes["grown (new layers)"][0], model.params()
    return 4 * (old + grown + max(params for params, _ in sizes.values())), 4 * 4 * old


def _gb(size: float) -> str:
    return f"{size / 1e9:.1f} GB"


def _fits(sizes: dict[int, float], limit: float = FITS * H200_BYTES) -> str:
    """ "one H200", else the fewest H200s whose shards fit (``--shard``), else "no" (the whole model does not)."""
    count = next((g for g, size in sizes.items() if size <= limit), None)
    return "no" if count is None else "one H200" if count == 1 else f"{count} H200s, --shard"


def table(devices: tuple[int, ...] = DEVICES) -> list[str]:
    """docs/grow.md's table: each model × arm, its parameters, its bytes on one device, per device sharded
    over ``devices`` H200s (``per_device``), and the fewest H200s it fits."""
    header = "| model | arm | parameters | trainable | one GPU | " + " | ".join(f"per GPU, {g}" for g in devices)
    lines = [header + " | fits on |", "|---" * (6 + len(devices)) + "|"]
    for model in LLAMA_2:
        for arm, (params, trainable) in arms(model).items():
            sizes = {g: per_device(params, trainable, g) for g in (1, *devices)}
            shards = " | ".join(_gb(sizes[g]) for g in devices)
            counts = f"{params / 1e9:.2f} B | {trainable / 1e9:.2f} B"
            lines.append(f"| {model.name} | {arm} | {counts} | {_gb(sizes[1])} | {shards} | {_fits(sizes)} |")
    return lines


def certify_table(pool: int = 256, block_size: int = 512) -> list[str]:
    """certify's device memory with every point in one pass and per point, the most points a pass can
    carry on one H200, and the pools on disk per point of a pass (``pool``, ``block_size``)."""
    lines = [
        "| model | points | all in one pass | per point | points per pass on one H200 | "
        f"pools per point (pool {pool}, block {block_size}) |",
        "|---|---|---|---|---|---|",
    ]
    for model in LLAMA_2:
        fit = points_that_fit(model)
        fits = "all" if fit >= model.layers else f"{fit}: `--points-per-pass {fit}`"
        disk = f"{_gb(capture_bytes(pool, block_size, model.d))} full, "
        disk += f"{capture_bytes(pool, block_size, model.d, 'pooled') / 1e6:.1f} MB pooled"
        lines.append(
            f"| {model.name} | {model.layers} | {_gb(certify_bytes(model, model.layers))} | "
            f"{_gb(point_bytes(model))} | {fits} | {disk} |"
        )
    return lines


def activation_lines(block_size: int = 2048) -> list[str]:
    """Activations of one sequence of ``block_size`` tokens in the grown model (``activation_bytes``), kept
    and recomputed."""
    lines = []
    for model in LLAMA_2:
        layers = model.layers + model.layers // EVERY
        kept, recomputed = (activation_bytes(model.d, layers, model.vocab, block_size, r) for r in (False, True))
        lines.append(
            f"- {model.name} grown ({layers} layers), one sequence of {block_size} tokens: {_gb(kept)}, "
            f"{_gb(recomputed)} with `--activation-checkpointing`"
        )
    return lines


def host_lines() -> list[str]:
    """What the host holds (``host_bytes``), per model."""
    return [
        f"- {model.name}: {_gb(every)} in every process (old, grown, the arm in training), and {_gb(main)} more "
        f"in the main process (the finished arms until the decision): {_gb(8 * every + main)} for a node's 8"
        for model in LLAMA_2
        for every, main in [host_bytes(model)]
    ]
