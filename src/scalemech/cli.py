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
from typing import Any

from . import __version__, jobs
from .certify import certify, format_certificate
from .config import ConfigError, ModelJob, load_config, model_jobs
from .data import DataError
from .grads import PoolError
from .layout import Layout

USER_ERRORS = (ValueError, KeyError, OSError, ConfigError, DataError, PoolError)
"""What ``main`` reports in one line; anything else is a bug and keeps its traceback."""
ERROR_STATUS = 2


MODEL_COMMANDS = {"train": "train_model", "measure": "measure_model", "misalign": "misalign_model",
                  "intervene": "intervene_model", "expand": "expand_model"}


def _job(config: dict[str, Any], key: str) -> ModelJob:
    found = {job.key: job for job in model_jobs(config)}
    if key not in found:
        raise ValueError(f"unknown model {key!r}; this config has: {', '.join(found)}")
    return found[key]


def _model_command(args: argparse.Namespace) -> None:
    """Run the per-model rule of ``args.command`` exactly as the workflow would (same paths, params)."""
    config = load_config(args.config)
    rule, model_job, layout = MODEL_COMMANDS[args.command], _job(config, args.model), Layout(config["run"])
    where = (layout, model_job.dataset, model_job.name)
    arguments = {**jobs.inputs(rule, *where), **jobs.outputs(rule, *where), **jobs.params(rule, config, model_job)}
    jobs.call(rule, arguments, {**jobs.execution(config), **({"device": args.device} if args.device else {})})


def _prepare(args: argparse.Namespace) -> None:
    config = load_config(args.config)
    if args.dataset not in config["datasets"]:
        raise ValueError(f"dataset {args.dataset!r} is not in {args.config}; it has {sorted(config['datasets'])}")
    jobs.prepare_data(data=Layout(config["run"]).data(args.dataset), dataset=args.dataset,
                      settings=config["datasets"][args.dataset], offline=config["offline"])


def _figure(args: argparse.Namespace) -> None:
    from .plots import make_figure

    layout = Layout(load_config(args.config)["run"])
    print(make_figure(args.figure, layout.tables_dir, layout.figures))


def _report(args: argparse.Namespace) -> None:
    from .report import write_report

    layout = Layout(load_config(args.config)["run"])
    write_report(layout.tables_dir, layout.figures, layout.report)
    print(layout.report)


def _certify(args: argparse.Namespace) -> None:
    frame = certify(args.checkpoint, args.data, family=args.family, points=args.points, pool=args.pool,
                             M=args.M, K=args.K, batch_size=args.batch_size, device=args.device or "auto",
                             block_size=args.block_size, seed=args.seed)
    print(format_certificate(frame))
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
