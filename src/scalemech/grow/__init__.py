"""``scalemech grow``: act on the certificate, and test whether it pays.

1. **Where.** ``--at auto`` is greedy on ``certify``: insert after the point it ranks first among
   "grow here", train, certify the grown model again, and repeat up to ``--blocks`` times, stopping
   early when no point is "grow here" (with ``--train none``, one certificate's top points: an
   untrained insertion leaves the function, so the certificate, as it was). ``layer.3,layer.7``,
   LLaMA-Pro's ``every:K``, ADEPT's ``adept``, ShortGPT's ``bi`` (both scored on ``--retain``,
   ``scores``) and ``top`` are fixed placements, certified at every point too: grow says which rule
   chose each point and what the certificate says of it against its first (``placement``).
2. **Insertion.** A new layer is a copy of the layer at the point with its output projections zeroed
   (the block certify measured), built into the model's own layer list from its updated config
   (``models.hf_growth``); before any training the grown model's logits are checked to equal the old
   ones on held-out windows (max |Δ| ≤ 1e-5 in float32), else grow refuses, naming the family.
3. **Training.** The new layers only (``--train new``: every old weight stays bit-identical) or every
   weight, AdamW with warmup, seeded, resumable (``training.continued``). Two controls train the
   original model on every weight: for the same steps on the same batches (equal tokens), and for the
   steps whose FLOPs equal the grown model's training FLOPs (equal compute, counted by
   ``torch.utils.flop_counter``; under ``--train new`` a deeper layer's step costs less, so its
   control gets fewer steps: ``run.FLOPS_RULE``, stated in ``growth.json``).
4. **Decision.** Every model is scored on held-out test windows disjoint from the training tokens and
   from the certificate's pools; the grown model is recommended only when it beats both controls by
   more than 2 paired SE (``decision``). Otherwise it is still written, marked not recommended;
   ``--fallback`` writes the better control instead. With ``--retain`` (the old domain, ``retained``)
   two more arms train on the same batches, ``inplace`` and ``lora`` (``alternatives``), every model's
   forgetting is measured on held-out retain windows, and the decision weighs new-domain gain against
   forgetting (``tradeoff``).
5. **Output.** ``--out`` loads with plain ``AutoModelForCausalLM.from_pretrained`` (safetensors, the
   source's dtype, the tokenizer copied when there is one) and holds a model card (``card``) and
   ``growth.json`` (``output``);
   it is written whole or not at all, and never over or inside the source.

Every refusal comes before any weight loads (``checks``, ``output.check_out``); a rerun resumes only
the run it recorded (``resume``).
"""

from .run import GrowSettings, grow

__all__ = ["GrowSettings", "grow"]
