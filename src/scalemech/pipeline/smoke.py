"""The paper configuration at toy size: every grid, dataset, family, experiment and figure of
``config/paper.yaml``, with only sizes shrunk, on fixtures in the real on-disk formats.

    python -m scalemech.pipeline.smoke --out DIR      # DIR/fixtures/ and DIR/paper-smoke.yaml
    snakemake --cores all --configfile DIR/paper-smoke.yaml --directory DIR

``paper_smoke(paper, fixtures)`` derives the config from the paper's (so the two cannot drift);
``write_fixtures(paper, fixtures)`` writes what it reads:

- CIFAR-10 and CIFAR-100: image-folder archives ``{train,test}/<class>/*.png`` (``archive:``). The
  paper reads the official python tarballs from ``root``; ``data/cifar.py`` recognizes those by
  their top folder and always checks their md5, so a synthetic tarball in the official layout is
  (rightly) refused. The pickle reader itself is tested on such tarballs with the md5 patched
  (tests/test_data.py).
- ImageNet: an ImageFolder tree ``{train,val}/<wnid>/*.JPEG`` of non-square JPEGs, resized and
  cropped to the toy resolution.
- The corpus and tinyshakespeare: generated UTF-8 text files (``path:``).
- Each Pythia checkpoint: a local directory holding a randomly initialized GPT-NeoX with the
  checkpoint's layer count (``PYTHIA_LAYERS``) at a tiny width, and a byte-level BPE tokenizer
  trained on the fixture text; its ``revision`` is kept (a local directory ignores it).
"""

from __future__ import annotations

import argparse
import copy
import io
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from ..config import read_yaml, validate_config

TOY = {
    "epochs": 1,  # image grids: one pass over the fixture's train split
    "steps": 4,  # step budgets and token budgets (tokens = steps x batch x block)
    "tokens_per_parameter": 1e-3,  # a toy llama of width 64, 12 layers (~0.66 M parameters): 6 steps of 4 x 32
    "image_batch": 16,
    "text_batch": 4,
    "block_size": 32,  # llama windows and pretrained windows, in tokens
    "eval_windows": 16,  # llama evaluation windows per split
    "resolution": 32,  # imagenet pixels
    "workers": 2,  # imagenet decoding processes (more than one: the process pool's path)
    "pool": 16,  # measure's train and test pools
    "trajectory_pool": 8,
    "measure_batch": 8,
    "misalign_draws": 200,
    "grow_steps": 2,
    "grow_batch": 8,
    "snapshots": 4,
    "checkpoint_every": 2,
    "cost_n": 16,
    "max_covariance_mb": 64,
}
"""Every size the smoke config shrinks to; everything else is the paper's."""
IMAGE_SPLITS = {"cifar10": (10, 8, 4), "cifar100": (100, 2, 1), "imagenet": (10, 8, 4)}
"""Fixture classes and images per class in the train and test splits (the test split holds both
measure's test pool and intervene's held-out pool)."""
TEXT_BYTES = {"corpus": 200_000, "tinyshakespeare": 40_000}
PYTHIA_LAYERS = {"pythia-14m": 6, "pythia-31m": 6, "pythia-70m": 6, "pythia-2.8b": 32, "pythia-6.9b": 32}
"""Decoder layers of the Pythia checkpoints (their config.json); a stand-in keeps its checkpoint's."""
STANDIN_WIDTH, STANDIN_VOCAB = 32, 320


def on_cpus(resources: dict[str, Any]) -> dict[str, Any]:
    """A grid's ``resources`` on this machine's CPUs: no GPU, so no share of one (``gpu_mem_mb``)."""
    return {**{k: v for k, v in resources.items() if k != "gpu_mem_mb"}, "gpu": 0}


def _two_smallest(values: list) -> list:
    return sorted(values)[:2]


def _shrunk_recipe(recipe: dict[str, Any], text: bool) -> dict[str, Any]:
    """The recipe with its budget kind kept (epochs, steps, tokens or tokens per parameter) and its sizes
    shrunk; an SGD lr
    scales with the batch (Goyal et al. 2017: the paper's 0.2 at batch 512 diverges at batch 16 in the
    few steps a toy run takes, too few for any warmup)."""
    batch = min(recipe["batch_size"], TOY["text_batch"] if text else TOY["image_batch"])
    shrunk = {**recipe, "batch_size": batch}
    if recipe["optimizer"] == "sgd":
        shrunk["lr"] = recipe["lr"] * batch / recipe["batch_size"]
    if "epochs" in recipe:
        shrunk["epochs"] = TOY["epochs"]
    elif "steps" in recipe:
        shrunk["steps"] = min(recipe["steps"], TOY["steps"])
    elif "tokens_per_parameter" in recipe:
        shrunk["tokens_per_parameter"] = TOY["tokens_per_parameter"]
    else:
        shrunk["tokens"] = TOY["steps"] * shrunk["batch_size"] * TOY["block_size"]
    if text:  # fixed evaluation windows, as many as the fixture's test split holds
        shrunk["eval_windows"] = min(recipe.get("eval_windows", TOY["eval_windows"]), TOY["eval_windows"])
    return shrunk


def _shrunk_grid(grid: dict[str, Any]) -> dict[str, Any]:
    """Depths and widths cut to their two smallest values (a llama's width, d_model, to the two
    smallest multiples of its head_dim: 512 wide and 12 deep is 38M parameters), windows of
    ``block_size`` tokens, the recipe shrunk and no GPU."""
    shrunk = copy.deepcopy(grid)
    shrunk["depths"] = _two_smallest(grid["depths"])
    shrunk["widths"] = _two_smallest(grid["widths"])
    if grid["family"] == "llama":
        head_dim = grid.get("model", {}).get("head_dim", 64)
        shrunk["widths"] = [head_dim, 2 * head_dim]
        shrunk["model"]["block_size"] = TOY["block_size"]
    shrunk["recipe"] = _shrunk_recipe(grid["recipe"], grid["family"] == "llama")
    shrunk["resources"] = on_cpus(grid.get("resources", {}))
    return shrunk


def image_archive(fixtures: Path, name: str) -> Path:
    return fixtures / f"{name}-folder.tar.gz"


def text_file(fixtures: Path, name: str) -> Path:
    return fixtures / f"{name}.txt"


def standin_dir(fixtures: Path, checkpoint: str) -> Path:
    """The stand-in directory of hub checkpoint ``owner/name``."""
    return fixtures / "hf" / checkpoint.split("/")[-1]


def _shrunk_dataset(name: str, settings: dict[str, Any], fixtures: Path) -> dict[str, Any]:
    if name in ("cifar10", "cifar100"):
        return {"archive": str(image_archive(fixtures, name))}
    if name == "imagenet":
        workers = min(settings.get("workers", 1), TOY["workers"])
        return {**settings, "root": str(fixtures / "imagenet"), "resolution": TOY["resolution"], "workers": workers}
    kept = {k: v for k, v in settings.items() if k not in ("url", "download")}
    return {**kept, "path": str(text_file(fixtures, name))}


def paper_smoke(paper: dict[str, Any], fixtures: str | Path, compile: bool = False) -> dict[str, Any]:
    """The smoke config of ``paper`` (a config as read, before validation) reading the fixtures
    that ``write_fixtures(paper, fixtures)`` writes: run ``<run>-smoke``, offline, on the CPU,
    one thread, and the sizes of ``TOY``; every grid, pretrained group, dataset kind, experiment
    setting and grid of values not named in ``TOY`` is the paper's. ``train.compile`` stays the
    paper's only with ``compile`` (on a CPU, compiling costs about 30 s per trained model; the
    compiled path has its own tests and runs in benchmarks/cuda_check.py)."""
    fixtures = Path(fixtures).resolve()
    smoke = copy.deepcopy(paper)
    smoke.update(run=f"{paper['run']}-smoke", device="cpu", offline=True, threads=1)
    smoke["datasets"] = {name: _shrunk_dataset(name, s, fixtures) for name, s in paper["datasets"].items()}
    smoke["grids"] = {name: _shrunk_grid(grid) for name, grid in paper["grids"].items()}
    for group in smoke.get("pretrained", {}).values():
        group["block_size"] = TOY["block_size"]
        group["resources"] = on_cpus(group.get("resources", {}))
        for entry in group["checkpoints"].values():
            entry["checkpoint"] = str(standin_dir(fixtures, entry["checkpoint"]))
    pool = TOY["pool"]
    train = smoke.setdefault("train", {})
    # a toy's few steps train no model: its report is about early training (docs/science.md §7.1)
    train.update(checkpoint_every=TOY["checkpoint_every"], snapshots=TOY["snapshots"], criterion="early-training")
    train["compile"] = train.get("compile", False) and compile
    smoke.setdefault("trajectory", {})["pool"] = TOY["trajectory_pool"]
    smoke.setdefault("measure", {}).update(train_pool=pool, test_pool=pool, batch_size=TOY["measure_batch"])
    misalign = smoke.setdefault("misalign", {})
    misalign["sizes"] = [size for size in misalign.get("sizes", [1, 2, 4]) if 4 * size <= pool] or [1]
    misalign["draws"] = TOY["misalign_draws"]
    grow = smoke.setdefault("grow", {})
    grow.update(steps=TOY["grow_steps"], batch_size=TOY["grow_batch"], pool=pool, heldout=pool)
    grow["certificate"] = {**grow.get("certificate", {}), "pool": pool, "M": 2, "K": 2}
    smoke.setdefault("cost", {}).update(n=TOY["cost_n"], max_covariance_mb=TOY["max_covariance_mb"])
    return smoke


# -- fixtures --------------------------------------------------------------------------------------
def _image(rng: np.random.Generator, label: int, classes: int, size: tuple[int, int]) -> np.ndarray:
    """Noise around a class colour: learnable, so training has something to learn."""
    tint = np.array([label, (label * 7) % classes, (label * 13) % classes]) * (160 // classes + 1)
    return np.clip(rng.normal(48, 24, (*size, 3)) + tint, 0, 255).astype(np.uint8)


def _encoded(pixels: np.ndarray, image_format: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=image_format)
    return buffer.getvalue()


def _image_members(name: str, splits: tuple[str, str], size: tuple[int, int], suffix: str) -> dict[str, bytes]:
    """``{<split>/<class>/<file>: encoded image}`` of the fixture of ``name``."""
    classes, per_train, per_test = IMAGE_SPLITS[name]
    rng = np.random.default_rng(len(name))
    image_format = "PNG" if suffix == ".png" else "JPEG"
    members = {}
    for split, per_class in zip(splits, (per_train, per_test)):
        for label in range(classes):
            folder = f"n{label:08d}" if name == "imagenet" else f"class{label:03d}"
            for i in range(per_class):
                pixels = _image(rng, label, classes, size)
                members[f"{split}/{folder}/{i:04d}{suffix}"] = _encoded(pixels, image_format)
    return members


def write_cifar_archive(fixtures: Path, name: str) -> Path:
    """An image-folder archive ``{train,test}/<class>/*.png`` of 32x32 images."""
    path = image_archive(fixtures, name)
    with tarfile.open(path, "w:gz") as tar:
        for member, data in _image_members(name, ("train", "test"), (32, 32), ".png").items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_imagenet_folder(fixtures: Path) -> Path:
    """An ImageFolder tree ``{train,val}/<wnid>/*.JPEG`` of 40x48 JPEGs (taller than wide: the
    prepare step resizes the shorter side and crops the centre)."""
    root = fixtures / "imagenet"
    for member, data in _image_members("imagenet", ("train", "val"), (48, 40), ".JPEG").items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_bytes(data)
    return root


WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more out up into do any "
    "thy thou lord king sweet love night death heaven crown sword speak hath doth"
).split()


def generated_text(size: int, seed: int) -> str:
    """``size`` bytes of word salad in lines and paragraphs (ASCII, so bytes are characters)."""
    rng = np.random.default_rng(seed)
    lines, total = [], 0
    while total < size:
        words = [WORDS[i] for i in rng.zipf(1.3, rng.integers(4, 12)) % len(WORDS)]
        line = " ".join(words).capitalize() + (".\n\n" if rng.random() < 0.1 else ",\n")
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def write_standin(directory: Path, layers: int, width: int, text: str, seed: int) -> Path:
    """A randomly initialized GPT-NeoX (Pythia's architecture) with ``layers`` layers of ``width``
    and a byte-level BPE tokenizer trained on ``text``, saved as a Hugging Face directory."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [text], vocab_size=STANDIN_VOCAB - 16, special_tokens=["<|endoftext|>"], show_progress=False
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>")
    config = GPTNeoXConfig(
        vocab_size=STANDIN_VOCAB,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=4 * width,
        max_position_embeddings=2048,
        rotary_pct=0.25,
        use_parallel_residual=True,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    GPTNeoXForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def write_fixtures(paper: dict[str, Any], fixtures: str | Path) -> None:
    """Write every file ``paper_smoke(paper, fixtures)`` reads (see the module docstring)."""
    fixtures = Path(fixtures)
    fixtures.mkdir(parents=True, exist_ok=True)
    texts = {name: generated_text(size, seed) for seed, (name, size) in enumerate(TEXT_BYTES.items())}
    for name in paper["datasets"]:
        if name in ("cifar10", "cifar100"):
            write_cifar_archive(fixtures, name)
        elif name == "imagenet":
            write_imagenet_folder(fixtures)
        else:
            text_file(fixtures, name).write_text(texts.get(name) or generated_text(TEXT_BYTES["corpus"], 9))
    for group in paper.get("pretrained", {}).values():
        for i, entry in enumerate(group["checkpoints"].values()):
            name = entry["checkpoint"].split("/")[-1]
            text = texts.get(group["dataset"], texts["corpus"])
            write_standin(
                standin_dir(fixtures, entry["checkpoint"]), PYTHIA_LAYERS.get(name, 2), STANDIN_WIDTH * (i + 1), text, i
            )


def main(argv: list[str] | None = None) -> int:
    """``python -m scalemech.pipeline.smoke --out DIR [--paper config/paper.yaml]``."""
    parser = argparse.ArgumentParser(prog="python -m scalemech.pipeline.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for fixtures/ and paper-smoke.yaml")
    parser.add_argument("--paper", type=Path, default=Path("config/paper.yaml"), help="the config to shrink")
    parser.add_argument("--compile", action="store_true", help="keep the paper's train.compile (slow on a CPU)")
    args = parser.parse_args(argv)
    paper = read_yaml(args.paper)
    smoke = paper_smoke(paper, args.out / "fixtures", args.compile)
    validate_config(copy.deepcopy(smoke))
    write_fixtures(paper, args.out / "fixtures")
    config = args.out / "paper-smoke.yaml"
    config.write_text(
        f"# Generated by python -m scalemech.pipeline.smoke from {args.paper}; do not edit.\n"
        + yaml.safe_dump(smoke, sort_keys=False)
    )
    print(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
