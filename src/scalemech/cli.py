"""``scalemech``: run one step of the pipeline by hand, or certify your own checkpoint.

    scalemech prepare   --config config/config.yaml --dataset mnist5k
    scalemech train     --config config/config.yaml --model mnist5k/resnet-d20-w1-s0
    scalemech measure   --config config/config.yaml --model mnist5k/resnet-d20-w1-s0
    scalemech misalign | intervene | expand   (same arguments)
    scalemech figure    --config config/config.yaml --figure F4_dalign_vs_width
    scalemech report    --config config/config.yaml
    scalemech certify   --checkpoint PATH --data DIR_OR_TEXT_FILE [--M 16 --K 16]

Paths follow the workflow's layout (results/<run>/…), so a step run here is the same job
Snakemake would run.

A user error (bad argument, missing or corrupt file, invalid config) is printed as one line,
``scalemech: error: <message>``, with exit status 2 like argparse's own usage errors;
``scalemech --debug …`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import __version__, pipeline
from .config import ConfigError, ModelJob, load_config, model_jobs
from .data import DataError
from .grads import PoolError

USER_ERRORS = (ValueError, KeyError, OSError, ConfigError, DataError, PoolError)
"""What ``main`` reports in one line; anything else is a bug and keeps its traceback."""
ERROR_STATUS = 2


class Layout:
    """Where the workflow keeps each output of a run (mirrors workflow/rules/*.smk)."""

    def __init__(self, run: str):
        self.results, self.figures = Path("results") / run, Path("figures") / run

    def data(self, dataset: str) -> Path:
        return self.results / "data" / dataset

    def model_dir(self, job: ModelJob) -> Path:
        return self.results / "models" / job.key

    def checkpoints(self, job: ModelJob) -> Path:
        return self.results / "checkpoints" / job.key

    def stats(self, job: ModelJob) -> Path:
        return self.results / "stats" / f"{job.key}.parquet"

    def covmats(self, job: ModelJob) -> Path:
        return self.results / "stats" / f"{job.key}.covmats.parquet"

    def pools(self, job: ModelJob) -> Path:
        return self.results / "pools" / job.key

    def experiment(self, kind: str, job: ModelJob) -> Path:
        return self.results / kind / f"{job.key}.csv"


def _job(config: dict[str, Any], key: str) -> ModelJob:
    jobs = {job.key: job for job in model_jobs(config)}
    if key not in jobs:
        raise ValueError(f"unknown model {key!r}; this config has: {', '.join(jobs)}")
    return jobs[key]


def _model_command(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    run, job = config["run"], _job(config, args.model)
    paths, device = Layout(run), args.device or config["device"]
    model_pt = paths.model_dir(job) / "model.pt"
    if args.command == "train":
        pipeline.train_model(job.spec, job.recipe, job.seed, str(paths.data(job.dataset)), str(paths.model_dir(job)),
                             str(paths.checkpoints(job)), job.keys(run), device, config["train"]["checkpoint_every"],
                             config["train"]["compile"])
    elif args.command == "measure":
        pipeline.measure_model(str(model_pt), str(paths.data(job.dataset)), job.keys(run), config["measure"], device,
                               str(paths.stats(job)), str(paths.covmats(job)), str(paths.pools(job)))
    elif args.command == "misalign":
        pipeline.misalign_model(str(paths.stats(job)), str(paths.pools(job)), config["misalign"],
                                str(paths.experiment("misalign", job)))
    elif args.command == "intervene":
        pipeline.intervene_model(str(model_pt), str(paths.data(job.dataset)), str(paths.pools(job)), job.keys(run),
                                 config["intervene"], config["measure"], device,
                                 str(paths.experiment("intervene", job)))
    elif args.command == "expand":
        pipeline.expand_model(str(model_pt), str(paths.data(job.dataset)), job.keys(run), config["expand"],
                              config["measure"], device, str(paths.experiment("expand", job)))


def _prepare(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    if args.dataset not in config["datasets"]:
        raise ValueError(f"dataset {args.dataset!r} is not in {args.config}; it has {sorted(config['datasets'])}")
    out = Layout(config["run"]).data(args.dataset)
    pipeline.prepare(args.dataset, config["datasets"][args.dataset], str(out), config["offline"])


def _figure(args: argparse.Namespace) -> None:
    from .plots import make_figure

    paths = Layout(load_config(args.config)["run"])
    print(make_figure(args.figure, paths.results / "tables", paths.figures))


def _report(args: argparse.Namespace) -> None:
    from .report import write_report

    paths = Layout(load_config(args.config)["run"])
    write_report(paths.results / "tables", paths.figures, paths.results / "report.md")
    print(paths.results / "report.md")


def _certify(args: argparse.Namespace) -> None:
    frame = pipeline.certify(args.checkpoint, args.data, family=args.family, points=args.points, pool=args.pool,
                             M=args.M, K=args.K, batch_size=args.batch_size, device=args.device or "auto",
                             block_size=args.block_size, seed=args.seed)
    print(pipeline.format_certificate(frame))
    if args.out:
        frame.to_csv(args.out, index=False)
        print(f"written {args.out}", file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="scalemech", description=__doc__.split("\n")[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.add_argument("--debug", action="store_true", help="show the traceback of an error")
    commands = top.add_subparsers(dest="command", required=True)

    prepare = commands.add_parser("prepare", help="prepare one dataset of a config")
    prepare.add_argument("--config", default="config/config.yaml")
    prepare.add_argument("--dataset", required=True)
    prepare.set_defaults(func=_prepare)

    for name, help_ in [("train", "train one model"), ("measure", "gradient statistics of one model (E2, E3, E5)"),
                        ("misalign", "misalignment probability and certificates (E6)"),
                        ("intervene", "zero-init residual parameter intervention (E7)"),
                        ("expand", "depth expansion with jumpboard and fallback (E8)")]:
        sub = commands.add_parser(name, help=help_)
        sub.add_argument("--config", default="config/config.yaml")
        sub.add_argument("--model", required=True, help="<dataset>/<model>, e.g. mnist5k/resnet-d20-w1-s0")
        sub.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: the config's device")
        sub.set_defaults(func=_model_command)

    figure = commands.add_parser("figure", help="draw one figure from the run's tables")
    figure.add_argument("--config", default="config/config.yaml")
    figure.add_argument("--figure", required=True, help="e.g. F4_dalign_vs_width")
    figure.set_defaults(func=_figure)

    report = commands.add_parser("report", help="write results/<run>/report.md")
    report.add_argument("--config", default="config/config.yaml")
    report.set_defaults(func=_report)

    certify = commands.add_parser("certify", help="d_align and the expansion certificate of your own checkpoint")
    certify.add_argument("--checkpoint", required=True,
                         help="a scalemech model.pt, or a Hugging Face hub name / local directory")
    certify.add_argument("--family", choices=["hf", "resnet", "llama", "tvresnet"],
                         help="default: hf unless the checkpoint is a model.pt")
    certify.add_argument("--data", required=True, help="a prepared dataset directory or a text file")
    certify.add_argument("--points", default="all", help="'all', a count, or comma-separated names")
    certify.add_argument("--pool", type=int, default=256, help="examples per pool (train and test)")
    certify.add_argument("--M", type=int, default=16, help="training examples behind the descent direction")
    certify.add_argument("--K", type=int, default=16, help="test examples that judge it")
    certify.add_argument("--batch-size", type=int, default=16)
    certify.add_argument("--block-size", type=int, help="tokens per example for language models")
    certify.add_argument("--seed", type=int, default=0)
    certify.add_argument("--device", choices=["auto", "cpu", "cuda"])
    certify.add_argument("--out", help="also write the table as CSV here")
    certify.set_defaults(func=_certify)
    return top


def _one_line(err: BaseException) -> str:
    """``err``'s message on one line (a KeyError's without the quotes ``str`` adds)."""
    text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
    head, *rest = [line.strip() for line in str(text).splitlines() if line.strip()] or [type(err).__name__]
    return f"{head} {'; '.join(rest)}" if rest else head


def main(argv: list[str] | None = None) -> int:
    """Run one command; a user error prints ``scalemech: error: <message>`` and returns ``ERROR_STATUS``."""
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except USER_ERRORS as err:
        if args.debug:
            raise
        print(f"scalemech: error: {_one_line(err)}", file=sys.stderr)
        return ERROR_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main())
