"""How much device memory each arm of ``scalemech grow`` needs at the scale of LLaMA-2, by arithmetic.

``grow`` trains in float32 (the checkpoint is written back in its own dtype) with AdamW, so an arm
holds ``4·N`` bytes of weights for its ``N`` parameters and, for its ``n`` trainable ones, ``4·n`` of
gradients and ``8·n`` of AdamW's two moments:

    bytes(arm) = 4·N + 12·n            (activations excluded: they scale with batch × block size)

FSDP over ``G`` devices shards all of it evenly, ``bytes / G`` each. The parameter counts are those of
a LLaMA decoder (``layer_params``: attention ``4·d²`` with as many key/value heads as heads, the
gated MLP ``3·d·f``, two norms ``2·d``); the arms are ``grow``'s: ``grown`` (LLaMA-Pro's every-4th
copies, the new layers trained), ``full`` (``full_tokens``/``full_flops``: every weight of the old
model), ``inplace`` (as many old layers trained in place) and ``lora`` (PEFT LoRA on every linear layer
of the old model at the rank whose adapters hold as many parameters as the new layers).

``certify``'s capture at a point stores ``pool`` per-example gradients per split as float32 rows of
``D = T·d`` (view ``full``; ``d`` with ``--view pooled``) on disk, so its scratch space is
``2·pool·D·4`` bytes per point; on the device it needs the model's weights, one batch's activations
and gradients, and one point's ``pool × pool`` Gram matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

H200_BYTES = 141e9
"""One H200's memory (141 GB of HBM3e); an arm "fits" when its weights and optimizer use at most 90 %
of it, the rest left to activations."""
FITS = 0.9


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


def capture_bytes(pool: int, block_size: int, d: int, view: str = "full") -> int:
    """``certify``'s scratch space per point: ``2·pool·D·4`` with ``D = T·d`` (full) or ``d`` (pooled)."""
    return 2 * pool * (block_size * d if view == "full" else d) * 4


def _gb(size: float) -> str:
    return f"{size / 1e9:.1f} GB"


def table(devices: tuple[int, ...] = (2, 4, 8)) -> list[str]:
    """The README's table: each model × arm, its parameters, its bytes (one device), per device under FSDP on
    ``devices`` H200s, and whether it fits on one."""
    header = "| model | arm | parameters | trainable | bytes | " + " | ".join(f"per GPU, {g}" for g in devices)
    lines = [header + " | one H200 |", "|---" * (6 + len(devices)) + "|"]
    for model in LLAMA_2:
        for arm, (params, trainable) in arms(model).items():
            size = arm_bytes(params, trainable)
            shards = " | ".join(_gb(size / g) for g in devices)
            fits = "fits" if size <= FITS * H200_BYTES else f"needs {-(-size // int(FITS * H200_BYTES))}"
            counts = f"{params / 1e9:.2f} B | {trainable / 1e9:.2f} B"
            lines.append(f"| {model.name} | {arm} | {counts} | {_gb(size)} | {shards} | {fits} |")
    return lines


def capture_lines(pool: int = 256, block_size: int = 512) -> list[str]:
    """The scratch space of ``certify`` at each model's width (``pool``, ``block_size``), both views."""
    return [
        f"- {model.name}: {_gb(capture_bytes(pool, block_size, model.d))} per point with `--view full` "
        f"(pool {pool}, block {block_size}), {capture_bytes(pool, block_size, model.d, 'pooled') / 1e6:.1f} MB "
        "with `--view pooled`"
        for model in LLAMA_2
    ]
