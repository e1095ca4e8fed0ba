"""The grids and pretrained groups expanded into one ``ModelJob`` per (dataset, family, depth, width,
seed): the unit of training, measurement and every experiment after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError


def format_width(width: float) -> str:
    """``0.5 -> '0.5'``, ``1.0 -> '1'``, ``256 -> '256'``: the width as it appears in paths."""
    return f"{width:g}"


@dataclass(frozen=True)
class ModelJob:
    """One model of a grid (trained) or of a pretrained group (measured as is)."""

    grid: str
    dataset: str
    family: str
    depth: int
    width: float
    seed: int
    spec: dict[str, Any] = field(hash=False)
    recipe: dict[str, Any] | None = field(hash=False)  # None: pretrained, nothing to train
    resources: dict[str, Any] = field(hash=False, default_factory=dict)

    @property
    def name(self) -> str:
        if self.family == "hf":
            return f"hf-{self.spec['name']}"
        return f"{self.family}-d{self.depth}-w{format_width(self.width)}-s{self.seed}"

    @property
    def key(self) -> str:
        """``<dataset>/<name>``: where the model's outputs live under results/<run>/."""
        return f"{self.dataset}/{self.name}"

    def keys(self, run: str) -> dict[str, Any]:
        """The model-key columns of every table row this model produces."""
        return {
            "run": run,
            "dataset": self.dataset,
            "family": self.family,
            "depth": self.depth,
            "width": self.width,
            "seed": self.seed,
            "model": self.name,
        }


def model_jobs(config: dict[str, Any]) -> list[ModelJob]:
    """Every model the config asks for, in config order."""
    jobs = []
    for grid_name, grid in config["grids"].items():
        for depth in grid["depths"]:
            for width in grid["widths"]:
                for seed in grid["seeds"]:
                    spec = {"family": grid["family"], "depth": depth, "width": width, **grid["model"]}
                    jobs.append(
                        ModelJob(
                            grid_name,
                            grid["dataset"],
                            grid["family"],
                            depth,
                            width,
                            seed,
                            spec,
                            grid["recipe"],
                            grid["resources"],
                        )
                    )
    for group_name, group in config.get("pretrained", {}).items():
        for name, entry in group["checkpoints"].items():
            spec = {
                "family": "hf",
                "name": name,
                "checkpoint": entry["checkpoint"],
                "revision": entry["revision"],
                "local_files_only": config["offline"],
                "dtype": group["dtype"],
                "block_size": group["block_size"],
            }
            jobs.append(ModelJob(group_name, group["dataset"], "hf", 0, 0, 0, spec, None, group["resources"]))
    names = [job.key for job in jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"two grids make the same model(s) {duplicates}; give them different datasets or sizes")
    return jobs
