"""Where a run keeps everything: one home for every path, used by the rules and by the CLI.

Paths are relative to the working directory. The rules call a ``Layout`` with wildcard names
(``layout.model("{dataset}", "{model}")``) to get patterns; the CLI calls it with real names,
so a step run by hand writes exactly where Snakemake would::

    results/<run>/data/<dataset>/                        prepared tensors + manifest.json
    results/<run>/models/<dataset>/<model>/              model.pt, metrics.json, curve.csv
    results/<run>/checkpoints/<dataset>/<model>/         resume states (not a declared output)
    results/<run>/snapshots/<dataset>/<model>/<run id>/  weights along training (not a declared output)
    results/<run>/<table>/<dataset>/<model>.csv          one model's rows of a table (covmats: .parquet)
    results/<run>/pools/<dataset>/<model>/               gradient pools (split/point/view)
    results/<run>/tables/<table>.csv                     the tidy tables (covmats: .parquet)
    results/<run>/report.md                              the claims report
    results/<run>/report.rst                             the first page of snakemake --report
    figures/<run>/<stem>.{pdf,png}
    logs/<run>/<step>/... .log, benchmarks/<run>/<step>/... .tsv
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def suffix(table: str) -> str:
    """The file suffix of ``table``: parquet for the long heat-map matrices, CSV otherwise."""
    return ".parquet" if table == "covmats" else ".csv"


def table_path(tables_dir: str | Path, table: str) -> Path:
    """Where the workflow keeps ``table`` in ``tables_dir``: ``<tables_dir>/<table><suffix>``."""
    return Path(tables_dir) / f"{table}{suffix(table)}"


@dataclass(frozen=True)
class Layout:
    """The paths of run ``run``."""

    run: str

    @property
    def results(self) -> str:
        return f"results/{self.run}"

    def data(self, dataset: str) -> str:
        return f"{self.results}/data/{dataset}"

    def model(self, dataset: str, model: str, file: str = "model.pt") -> str:
        """A trained model's ``file``: ``model.pt``, ``metrics.json`` or ``curve.csv``."""
        return f"{self.results}/models/{dataset}/{model}/{file}"

    def checkpoints(self, dataset: str, model: str) -> str:
        return f"{self.results}/checkpoints/{dataset}/{model}"

    def snapshots(self, dataset: str, model: str) -> str:
        """Weight snapshots along training, one directory per run identity (not a declared output)."""
        return f"{self.results}/snapshots/{dataset}/{model}"

    def adapted(self, dataset: str, model: str) -> str:
        """E12's grow runs of one base (its exported checkpoint, one output per placement; not declared:
        an interrupted job resumes from grow's own states there)."""
        return f"{self.results}/adapt/{dataset}/{model}"

    def per_model(self, table: str, dataset: str, model: str) -> str:
        """One model's rows of a table measured per model (``steps.PER_MODEL_TABLES``)."""
        return f"{self.results}/{table}/{dataset}/{model}{suffix(table)}"

    def pools(self, dataset: str, model: str) -> str:
        return f"{self.results}/pools/{dataset}/{model}"

    def table(self, name: str) -> str:
        return f"{self.results}/tables/{name}{suffix(name)}"

    @property
    def tables_dir(self) -> str:
        return f"{self.results}/tables"

    @property
    def report(self) -> str:
        return f"{self.results}/report.md"

    @property
    def front_page(self) -> str:
        return f"{self.results}/report.rst"

    @property
    def figures(self) -> str:
        return f"figures/{self.run}"

    def figure(self, stem: str, extension: str) -> str:
        return f"{self.figures}/{stem}.{extension}"

    def log(self, step: str, name: str) -> str:
        """The log of the job ``name`` of ``step`` (a rule writes it through its ``log:``)."""
        return f"logs/{self.run}/{step}/{name}.log"

    def benchmark(self, step: str, name: str) -> str:
        """Snakemake's ``benchmark:`` record of the job ``name`` of ``step``."""
        return f"benchmarks/{self.run}/{step}/{name}.tsv"
