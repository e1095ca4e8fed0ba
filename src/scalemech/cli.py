"""scalemech: run one step of the pipeline by hand, or certify your own checkpoint.

    scalemech check     --config my-config.yaml
    scalemech prepare   --config config/config.yaml --dataset mnist5k
    scalemech train     --config config/config.yaml --model mnist5k/resnet-d20-w0.5-s0
    scalemech measure   --config config/config.yaml --model mnist5k/resnet-d20-w0.5-s0
    scalemech misalign | intervene | growth   (same arguments)
    scalemech figure    --config config/config.yaml --figure F4_dalign_vs_width
    scalemech report    --config config/config.yaml
    scalemech certify   --checkpoint PATH --data DIR_TEXT_OR_TOKENS [--M 16 --K 16] [--wide] [--out CSV]
    scalemech grow      --checkpoint HF_MODEL --data TEXT_OR_TOKENS --out DIR [--at auto] [--train new]

Paths follow the workflow's layout (results/<run>/…), so a step run here is the same job
Snakemake would run.

A user error (bad argument, missing or corrupt file, invalid config, a full disk, a process of a
launch that ended) is printed as one line, "scalemech: error: <message>", with exit status 2 like
argparse's own usage errors (a failed write or a lost process says where to resume); Ctrl-C as
"scalemech: interrupted; <where to resume>", with exit status 130. "scalemech --debug ..." shows
the traceback instead. Under a launcher (torchrun), a refusal is printed by rank 0 alone, and a lost
process by the lowest rank left.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .core.steps import STEPS, Step
from .models import FAMILIES
from .stats import sizes

if TYPE_CHECKING:
    from .config import ModelJob

# Nothing heavy is imported here: ``scalemech --help`` and argument errors must not wait for torch,
# pandas or transformers; each command imports what it needs when it runs.

ERROR_STATUS = 2
REFUSAL_WAIT_SECONDS = 30
"""Under a launcher, how long a process other than rank 0 waits after a refusal for the launcher to stop it
(torchrun does at once when rank 0 exits); rank 0, which says it, may refuse a moment later."""
INTERRUPTED_STATUS = 130
"""Exit status after Ctrl-C (128 + SIGINT, as a shell reports it)."""
CERTIFY_EPILOG = """\
example (any Hugging Face decoder-only causal LM, text data):
  scalemech certify --checkpoint EleutherAI/pythia-70m --data corpus.txt --block-size 256 --M 16 --K 16

verdicts, one per insertion point:
  grow here             the ||mu||^2 interval lies above 0, b_exact < 0.5 and block_grad_norm > 0
  weak                  only one of the first two holds: a larger --pool, --M or --K may settle it
  no detectable signal  neither holds: these data give no reason to grow the model there
"""
"""``certify --help``'s closing text (the rule is ``certify.verdict``; tests check the two agree)."""
GROW_EPILOG = """\
example (grow where certify says, train the new layers, compare with continuing to train):
  scalemech grow --checkpoint ./my-llama --data stories.npy --out ./my-llama-grown --at auto --blocks 2

--at:  auto          greedy: insert after the point certify ranks first among "grow here", train,
                     certify again; up to --blocks rounds, stopping when no point is "grow here"
       best          as auto over certify's whole ranking: "grow here", then "weak", then no signal
                     (grows where the certificate is only weak too; E11's and E12's certificate point)
       pareto        as best, under the forgetting the certificate predicts on --retain: the largest
                     block_grad_norm among the points predicted to forget at most --max-forgetting per
                     nat gained (forget_A <= max x gain_B at their intervals' ends), else the least
                     forgetting per nat gained
       best:K        the certificate's first K points (pareto:K under its forgetting) in one round,
                     trained together: the certificate at the new parameters of every:K's K layers
       layer.3,...   after these decoder layers (the points certify names)
       every:K       LLaMA-Pro's stride (arXiv 2401.02415): after every K-th layer
       adept         ADEPT (arXiv 2510.10071): after the --blocks layers least important on --retain,
                     importance = sum |g * W| over the layer's weights
       bi            ShortGPT's block influence (arXiv 2403.03853): after the --blocks layers of least
                     1 - mean cos(layer input, layer output) on --retain
       top           --blocks new layers after the last layer

decision: the grown model is recommended only when its held-out loss beats both controls (the original
trained on the same tokens, and for the same FLOPs) by more than 2 paired SE; otherwise it is written
marked not recommended in growth.json (--fallback: the better control is written instead).
with --retain R, the certificate also predicts per point the first-order gain on --data (gain_B) and
rise of R's loss (forget_A) for a step along --data's mean gradient, and arms inplace (the copied layers
trained in place) and lora (PEFT LoRA on every linear layer, rank matching the new layers' parameters)
train on the same batches too. The arm named is on the
Pareto front of (new-domain loss, forgetting), an arm dominated only when another is lower by more than
2 paired SE on one axis and not higher by more than 2 on the other: the front arm of lowest new-domain
loss whose forgetting + 2 SE is at most --max-forgetting, else the front arm (grown included) that
forgets least. The grown model is recommended when it is named and is the only front arm, or leads
every other front arm within the budget on the new domain by more than 2 paired SE; otherwise the
named arm is the one to use (--fallback writes it).
"""
"""``grow --help``'s closing text (the rule is ``experiments.decision``)."""
THREADS_HELP = (
    "torch's CPU threads (default: OMP_NUM_THREADS when set; one per process under torchrun; else the cores this "
    "process may use that are idle now, at least 1: on busy cores more threads only wait on each other)"
)
LIBRARY_WARNINGS = (FutureWarning, DeprecationWarning)
"""Warnings a library raised (transformers' ``is_gradient_checkpointing`` notice, say) that ``main`` hides."""
DEVICES = ["auto", "cpu", "cuda"]
POINTS_PER_PASS_HELP = (
    "certificate: points captured per pass over the pools (default: all in one); fewer bound the device memory "
    "(a new layer per point) and the scratch disk (one group's pools) at the cost of more passes, the numbers unchanged"
)


def user_errors() -> tuple[type[BaseException], ...]:
    """What ``main`` reports in one line; anything else is a bug and keeps its traceback."""
    from .config import ConfigError
    from .core.device import DeviceError
    from .data import DataError
    from .gradients.pools import PoolError
    from .training.engine import PeerLost

    return (ValueError, KeyError, OSError, ConfigError, DataError, PoolError, DeviceError, PeerLost)


def non_negative(text: str) -> int:
    """An argparse type: an integer >= 0 (a seed); the message names the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; allowed: integers >= 0")
    return value


MODEL_COMMANDS: dict[str, Step] = {step.command: step for step in STEPS.values() if step.help}
"""The per-model steps run by hand, by command; a step whose job takes no device has no ``--device``."""


def _job(config: dict[str, Any], key: str) -> ModelJob:
    from .config import model_jobs

    found = {job.key: job for job in model_jobs(config)}
    if key not in found:
        raise ValueError(f"unknown model {key!r}; this config has: {', '.join(found)}")
    return found[key]


def _model_command(args: argparse.Namespace) -> None:
    """Run the per-model rule of ``args.command`` exactly as the workflow would (same paths, params)."""
    from .config import load_config
    from .core.steps import arguments
    from .pipeline import jobs

    config = load_config(args.config)
    rule = MODEL_COMMANDS[args.command].rule
    device = getattr(args, "device", None)
    settings = {**jobs.execution(config), **({"device": device} if device else {})}
    jobs.call(rule, arguments(rule, config, _job(config, args.model)), settings)


def _check(args: argparse.Namespace) -> None:
    from .config import load_config, model_jobs

    config = load_config(args.config)
    print(f"{args.config}: valid; run {config['run']!r}, {len(model_jobs(config))} models")


def _gpu_hours(args: argparse.Namespace) -> None:
    from .config import load_config
    from .pipeline.gpu_cost import gpu_hours, line, markdown

    frame = gpu_hours(load_config(args.config))
    print("\n".join(["H200-hours per grid and step:", "", *markdown(frame), "", line(frame)]))


def _prepare(args: argparse.Namespace) -> None:
    from .config import load_config
    from .core.layout import Layout
    from .pipeline import jobs

    config = load_config(args.config)
    if args.dataset not in config["datasets"]:
        raise ValueError(f"dataset {args.dataset!r} is not in {args.config}; it has {sorted(config['datasets'])}")
    jobs.prepare_data(
        data=Layout(config["run"]).data(args.dataset),
        dataset=args.dataset,
        settings=config["datasets"][args.dataset],
        offline=config["offline"],
    )


def _figure(args: argparse.Namespace) -> None:
    from .config import load_config
    from .core.layout import Layout

    layout = Layout(load_config(args.config)["run"])  # a bad config fails before plotting is imported
    from .figures import make_figure

    print(make_figure(args.figure, layout.tables_dir, layout.figures))


def _report(args: argparse.Namespace) -> None:
    from .config import load_config
    from .core.layout import Layout, table_path

    layout = Layout(load_config(args.config)["run"])  # a bad config fails before the report's imports
    if not any(Path(layout.tables_dir).glob("*.csv")):
        raise FileNotFoundError(
            f"{layout.tables_dir}: no tables to report on; run the workflow first (snakemake tables)"
        )
    from .core.tables import write_table
    from .report import verdict_rows, write_report

    verdicts = verdict_rows(layout.tables_dir)  # the verdict table the figures read, as the workflow writes it
    write_table(verdicts, table_path(layout.tables_dir, "verdicts"), "verdicts")
    write_report(layout.tables_dir, layout.figures, layout.report, verdicts=verdicts)
    print(layout.report)


def positive(text: str) -> int:
    """An argparse type: an integer >= 1 (a thread count); the message names the value."""
    value = non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive; allowed: integers >= 1")
    return value


def _use_threads(requested: int | None) -> None:
    """Set torch's CPU threads (``core.threads.torch_threads``; the model's line says how many)."""
    import torch

    from .core.threads import torch_threads

    torch.set_num_threads(torch_threads(requested)[0])


def _certify(args: argparse.Namespace) -> None:
    from .certify import certify, format_certificate
    from .certify.text import loss_line

    _use_threads(args.threads)

    frame = certify(
        args.checkpoint,
        args.data,
        family=args.family,
        points=args.points,
        pool=args.pool,
        M=args.M,
        K=args.K,
        batch_size=args.batch_size,
        device=args.device,
        block_size=args.block_size,
        seed=args.seed,
        view=args.view,
        tokenizer=args.tokenizer,
        out=args.out,  # checked writable before any work, written after it
        points_per_pass=args.points_per_pass,
        retain=args.retain,
    )
    print(frame.attrs["ran"])
    line, warning = loss_line(frame.attrs)
    if line:
        print(line)
    if warning:
        print(warning, file=sys.stderr)
    print(format_certificate(frame, wide=args.wide))
    if args.out:
        print(f"written {args.out}", file=sys.stderr)


def _grow(args: argparse.Namespace) -> None:
    from .grow.card import arm_table
    from .grow.run import Grower, GrowSettings, complete

    args.refused = True  # until every check has passed: each process refuses alike, and rank 0 says so

    _use_threads(args.threads)

    settings = GrowSettings(
        at=args.at,
        blocks=args.blocks,
        train=args.train,
        steps=args.steps,
        lr=args.lr,
        precision=args.precision,
        batch_size=args.batch_size,
        block_size=args.block_size,
        eval_windows=args.eval_windows,
        pool=args.pool,
        M=args.M,
        K=args.K,
        seed=args.seed,
        device=args.device,
        tokenizer=args.tokenizer,
        fallback=args.fallback,
        checkpoint_every=args.checkpoint_every,
        shard=args.shard,
        activation_checkpointing=args.activation_checkpointing,
        points_per_pass=args.points_per_pass,
        retain=args.retain,
        max_forgetting=args.max_forgetting,
        command=shlex.join(["scalemech", *args.argv]),
    )
    grower = Grower(args.checkpoint, args.data, Path(args.out), settings)
    args.refused = False
    record = complete(grower).result
    if grower.rank:
        return  # under torchrun the main process reports
    decision = record["decision"]
    print(arm_table(record))
    verdict = "recommended" if decision["recommended"] else "not recommended"
    print(f"decision: {verdict}: {decision['why']}; wrote {decision['written']} to {args.out}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions as written and appends ``(default: …)`` to every optional argument that has
    a default (an option whose default is None says in its help what happens without it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.option_strings
            and not action.required
            and action.default not in (None, argparse.SUPPRESS)
            and "%(default)" not in text
            and not isinstance(action, argparse._StoreTrueAction)
        ):
            text += " (default: %(default)s)"
        return text


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="scalemech",
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=HelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.add_argument("--debug", action="store_true", help="show the traceback of an error")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str, epilog: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_, description=help_, epilog=epilog, formatter_class=HelpFormatter)

    def config_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--config", default="config/config.yaml", help="the run's config file")

    check = command("check", "validate a config file (YAML syntax with file and line, schema, cross-checks)")
    config_option(check)
    check.set_defaults(func=_check)

    hours = command("gpu-hours", "a config's GPU-hours per grid and step, counted from FLOPs (pipeline.gpu_cost)")
    config_option(hours)
    hours.set_defaults(func=_gpu_hours)

    prepare = command("prepare", "prepare one dataset of a config")
    config_option(prepare)
    prepare.add_argument("--dataset", required=True, help="a dataset name of the config's datasets section")
    prepare.set_defaults(func=_prepare)

    for name, step in MODEL_COMMANDS.items():
        sub = command(name, step.help)
        config_option(sub)
        sub.add_argument("--model", required=True, help="<dataset>/<model>, e.g. mnist5k/resnet-d20-w0.5-s0")
        if step.device:
            sub.add_argument("--device", choices=DEVICES, help="where to compute (default: the config's device)")
        sub.set_defaults(func=_model_command)

    figure = command("figure", "draw one figure from the run's tables")
    config_option(figure)
    figure.add_argument("--figure", required=True, help="a figure name, e.g. F4_dalign_vs_width")
    figure.set_defaults(func=_figure)

    report = command("report", "write results/<run>/report.md and the verdict table the figures read")
    config_option(report)
    report.set_defaults(func=_report)

    certify_data_help = (
        "a prepared dataset directory, a UTF-8 text file, a .npy of token ids (1-D integers: one stream), "
        "a .npy of documents (2-D integers (n, T), one document a row: an example is a row's first "
        "block-size + 1 tokens; block-size at most T - 1, its default within the model's context), or nanoGPT's "
        "train.bin/val.bin (their directory, or train.bin with val.bin beside it)"
    )
    certify = command(
        "certify",
        "where to grow your own checkpoint: d_align, the expansion certificate and a verdict per insertion point",
        CERTIFY_EPILOG,
    )
    certify.add_argument(
        "--checkpoint",
        required=True,
        help="a scalemech model.pt, or a Hugging Face hub name / local directory of any decoder-only causal LM "
        "(tested: gpt2, gpt_neox, llama, mistral, mixtral, qwen2, qwen3, phi, phi3, gemma, gemma2, gemma3_text, "
        "olmo, olmo2, falcon, opt, gptj, bloom, starcoder2, gpt_bigcode)",
    )
    certify.add_argument(
        "--tokenizer",
        help="for text --data: the tokenizer (hub name or directory) when the checkpoint has none "
        "(default: the checkpoint's own)",
    )
    certify.add_argument(
        "--family",
        choices=list(FAMILIES),
        help="the checkpoint's model family (default: hf unless the checkpoint is a model.pt)",
    )
    certify.add_argument("--data", required=True, help=certify_data_help)
    certify.add_argument("--points", default="all", help="insertion points: 'all', a count, or comma-separated names")
    certify.add_argument(
        "--view",
        choices=["full", "pooled"],
        default="full",
        help="the gradient view: full (the whole stream) or pooled (one value per hidden unit / "
        "channel, summed over positions / space)",
    )
    certify.add_argument("--pool", type=int, default=sizes.POOL, help="examples per pool (train and test)")
    certify.add_argument("--M", type=int, default=sizes.M, help="training examples behind the descent direction")
    certify.add_argument("--K", type=int, default=sizes.K, help="test examples that judge it")
    certify.add_argument("--batch-size", type=int, default=16, help="examples per forward/backward pass")
    certify.add_argument(
        "--block-size",
        type=int,
        help="tokens per example for language models (default: the model's context, at most "
        "1024 for Hugging Face models)",
    )
    certify.add_argument("--seed", type=non_negative, default=0, help="seed of the pools and of the inserted blocks")
    certify.add_argument("--device", choices=DEVICES, default="auto", help="where to compute")
    certify.add_argument("--threads", type=positive, help=THREADS_HELP)
    certify.add_argument(
        "--retain",
        help="the model's old domain (--data's formats): each point also gets the first-order forgetting of it that "
        "a step along --data's mean gradient predicts, forget_A = -mu_B'mu_A with its interval (default: none)",
    )
    certify.add_argument("--points-per-pass", type=int, help=POINTS_PER_PASS_HELP)
    certify.add_argument(
        "--wide", action="store_true", help="print every column, one block of column=value lines per point"
    )
    certify.add_argument(
        "--out",
        help="also write the full table as CSV to this path, checked writable before any work (default: no file)",
    )
    certify.set_defaults(func=_certify)

    grow = command(
        "grow",
        "grow a Hugging Face decoder LM where the certificate says, train it, and test the gain against controls",
        GROW_EPILOG,
    )
    grow.add_argument("--checkpoint", required=True, help="a Hugging Face hub name or local directory of a decoder LM")
    grow.add_argument("--data", required=True, help=certify_data_help)
    grow.add_argument("--out", required=True, help="the directory to write (a plain transformers checkpoint)")
    grow.add_argument(
        "--tokenizer",
        help="for text --data: the tokenizer when the checkpoint has none (default: the checkpoint's own)",
    )
    grow.add_argument(
        "--at",
        default="auto",
        help="where: auto, best, best:K, pareto, pareto:K, layer.3,layer.7, every:K, adept, bi or top (sources below)",
    )
    grow.add_argument(
        "--blocks", type=int, help="--at auto: the most new layers; adept, bi, top: how many (default: 1)"
    )
    grow.add_argument(
        "--train", choices=["new", "all", "none"], default="new", help="train the new layers, every weight, or none"
    )
    grow.add_argument("--steps", type=int, default=200, help="training steps after each insertion round")
    grow.add_argument("--lr", type=float, default=2e-4, help="peak AdamW learning rate (10%% warmup, cosine)")
    grow.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="the arms' forward and loss in float32 or under bf16 autocast (float32 weights and optimizer state)",
    )
    grow.add_argument("--batch-size", type=int, default=8, help="sequences per step (and per measurement batch)")
    grow.add_argument("--block-size", type=int, help="tokens per sequence (default: certify's)")
    grow.add_argument("--eval-windows", type=int, default=128, help="held-out sequences scoring every model")
    grow.add_argument("--pool", type=int, default=sizes.POOL, help="certificate: examples per pool (as certify's)")
    grow.add_argument("--M", type=int, default=sizes.M, help="certificate: training examples behind the direction")
    grow.add_argument("--K", type=int, default=sizes.K, help="certificate: test examples that judge it")
    grow.add_argument("--checkpoint-every", type=int, default=50, help="steps between resume states")
    grow.add_argument("--points-per-pass", type=int, help=POINTS_PER_PASS_HELP)
    grow.add_argument(
        "--shard",
        action="store_true",
        help="under torchrun, shard each arm per decoder layer over the processes (FSDP2) instead of replicating it",
    )
    grow.add_argument(
        "--activation-checkpointing",
        action="store_true",
        help="recompute each decoder layer's activations in the backward instead of keeping them: the same steps, "
        "far less memory, one more forward pass per step",
    )
    grow.add_argument(
        "--fallback", action="store_true", help="when not recommended, write the better control (--retain: the winner)"
    )
    grow.add_argument(
        "--retain",
        help="the model's old domain (--data's formats): every arm is scored on its held-out windows for forgetting, "
        "the inplace and lora arms are trained, and --at adept/bi score layers on it (default: none, no forgetting)",
    )
    grow.add_argument(
        "--max-forgetting",
        type=float,
        help="--retain: the most forgetting (retain loss - the old model's, nats/token) a recommended grown model may "
        "have (default: 0.02, grow.tradeoff.MAX_FORGETTING: a 2%% rise of the old domain's perplexity, e^0.02 = 1.02, "
        "small beside what training on a new domain usually costs, yet measurable from a few hundred windows); "
        "--at pareto reads it per nat gained on --data, at first order",
    )
    grow.add_argument("--seed", type=non_negative, default=0, help="seed of the pools, batches and held-out windows")
    grow.add_argument("--device", choices=DEVICES, default="auto", help="where to compute")
    grow.add_argument("--threads", type=positive, help=THREADS_HELP)
    grow.set_defaults(func=_grow)
    return top


def _one_line(err: BaseException) -> str:
    """``err``'s message on one line (a KeyError's without the quotes ``str`` adds, an ``OSError``'s that
    names no file without its ``[Errno N]``)."""
    text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
    if isinstance(err, OSError) and err.strerror and err.filename is None:
        text = err.strerror
    head, *rest = [line.strip() for line in str(text).splitlines() if line.strip()] or [type(err).__name__]
    return f"{head} {'; '.join(rest)}" if rest else head


def _says(args: argparse.Namespace, err: BaseException) -> bool:
    """Whether this process prints ``err``: a lost process on the one rank ``PeerLost.report`` names; a
    refusal under a launcher on rank 0 (every rank refuses alike; the others wait ``REFUSAL_WAIT_SECONDS``,
    silent, for the launcher to stop them once rank 0 has said it and exited, and say it if not stopped);
    anything else on every process."""
    from .training.engine import PeerLost

    if isinstance(err, PeerLost):
        return err.report
    if getattr(args, "refused", False) and os.environ.get("RANK", "0") != "0":
        time.sleep(REFUSAL_WAIT_SECONDS)
    return True


def _resumable(err: BaseException) -> bool:
    """Whether rerunning resumes past ``err``: a write that failed for want of room, a lost process."""
    from .core.integrity import ROOM_ERRORS
    from .training.engine import PeerLost

    return isinstance(err, PeerLost) or (isinstance(err, OSError) and err.errno in ROOM_ERRORS)


def _resume_hint(args: argparse.Namespace) -> str:
    """Where an interrupted command resumes: grow from its ``--out``, a pipeline step from its checkpoints."""
    if args.command == "grow":
        return (
            f"rerun the same command to resume from the last resume state in {args.out}/.grow-state "
            f"(one every --checkpoint-every {args.checkpoint_every} steps)"
        )
    if args.command in MODEL_COMMANDS:
        return "rerun the same command to resume from the last checkpoint"
    return "rerun the command"


def main(argv: list[str] | None = None) -> int:
    """Run one command; a user error prints ``scalemech: error: <message>`` and returns ``ERROR_STATUS``."""
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line, for grow's model card
    try:
        with warnings.catch_warnings():
            for category in LIBRARY_WARNINGS:  # a library's notice to its callers, not to a user
                warnings.filterwarnings("ignore", category=category, module=r"(?!scalemech)")
            args.func(args)
    except KeyboardInterrupt as err:
        if args.debug:
            raise
        why = f" ({err})" if str(err) else ""  # the launcher's SIGTERM (``engine.stopped_by_launcher``)
        print(f"scalemech: interrupted{why}; {_resume_hint(args)}", file=sys.stderr)
        return INTERRUPTED_STATUS
    except Exception as err:
        if args.debug or not isinstance(err, user_errors()):
            raise
        message = _one_line(err)
        if args.command == "grow" and _resumable(err) and "rerun" not in message:
            message += f"; {_resume_hint(args)}"
        if _says(args, err):
            print(f"scalemech: error: {message}", file=sys.stderr)
        return ERROR_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main())
