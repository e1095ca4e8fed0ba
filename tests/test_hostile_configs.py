"""Hostile configs (issue 37): a config is data, and planning refuses what a job would refuse.

Each bad config fails ``scalemech check`` in one line (exit 2) that names the key, the value and
what is allowed, with no side effect; a representative few fail ``snakemake -n`` the same way.
A YTE template (``__use_yte__``) is refused; given with ``--configfile`` Snakemake evaluates it
before any workflow code runs (the caveat docs/running.md states), and it expands an alias bomb of
mappings and fails itself on a file holding no mapping or not UTF-8: the last tests pin these down.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from families import TRAINED, accepted_depths
from snakemake.common.configfile import load_configfile
from snakemake.settings.types import ConfigSettings
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_run import snakemake

from scalemech.cli import ERROR_STATUS, main
from scalemech.config import ConfigError, load_config, read_yaml, validate_config
from scalemech.config.checks import insertion_points
from scalemech.config.schema import PATTERNS, schema
from scalemech.config.strict_yaml import MAX_ALIAS_EXPANSIONS
from scalemech.data import DataError
from scalemech.data import text as text_data
from scalemech.models.meta import meta_model

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "config" / "config.yaml"


def quick() -> dict:
    return yaml.safe_load(QUICK.read_text())


def check(capsys, path: Path) -> str:
    """``scalemech check --config path``: exit 2 and one line, returned without its prefix."""
    assert main(["check", "--config", str(path)]) == ERROR_STATUS
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert not captured.out, captured.out
    return captured.err.removeprefix("scalemech: error: ").strip()


def write(path: Path, config: Any) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def yte_config(marker: Path) -> str:
    """The quick config as a YTE template whose ``run`` expression would create ``marker``."""
    expression = f"?__import__('os').system('touch {marker}') and 'quick' or 'quick'"
    return "__use_yte__: true\n" + QUICK.read_text().replace("run: quick", f"run: {expression}", 1)


def alias_bomb(levels: int = 9, width: int = 9, kind: str = "list") -> str:
    """``levels`` lists (or mappings) of ``width`` aliases of the one before: ``width ** levels`` leaves."""

    def node(value: str) -> str:
        if kind == "list":
            return "[" + ", ".join([value] * width) + "]"
        return "{" + ", ".join(f"k{j}: {value}" for j in range(width)) + "}"

    lines = ["l0: &l0 " + node('"lol"')] + [f"l{i}: &l{i} " + node(f"*l{i - 1}") for i in range(1, levels)]
    return QUICK.read_text() + "\n".join(lines) + "\n"


# -- configs are data -------------------------------------------------------------------------


def test_a_yte_config_is_refused_in_one_line_and_runs_nothing(capsys, tmp_path) -> None:
    marker, path = tmp_path / "PWNED", tmp_path / "yte.yaml"
    path.write_text(yte_config(marker))
    message = check(capsys, path)
    assert message.startswith(f"{path}:1: __use_yte__") and "allowed: plain YAML" in message, message
    assert not marker.exists()
    with pytest.raises(ConfigError, match="__use_yte__"):
        read_yaml(path)  # the loader the Snakefile reads every config file with
    path.write_text("base: &base {__use_yte__: true}\n<<: *base\n" + QUICK.read_text())  # yte sees it too
    with pytest.raises(ConfigError, match=f"{path}:1: __use_yte__"):  # where it is written
        read_yaml(path)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["list", "mapping"])
def test_an_alias_bomb_is_refused_at_once(capsys, tmp_path, kind) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(kind=kind))
    start = time.process_time()
    message = check(capsys, path)
    assert time.process_time() - start < 5, "the bomb was expanded"
    assert message.startswith(f"{path}:") and f"more than {MAX_ALIAS_EXPANSIONS}" in message, message


def test_a_few_aliases_and_merges_still_load(tmp_path) -> None:
    load_config(ROOT / "config" / "paper.yaml")  # one merge (<<: *cifar_resnet)
    path = tmp_path / "aliases.yaml"
    path.write_text(QUICK.read_text() + "x: &x [1, 2]\n" + "".join(f"y{i}: *x\n" for i in range(20)))
    assert read_yaml(path)["y19"] == [1, 2]
    path.write_text(alias_bomb(levels=2, width=MAX_ALIAS_EXPANSIONS))  # exactly the limit
    assert len(read_yaml(path)["l1"]) == MAX_ALIAS_EXPANSIONS
    path.write_text(alias_bomb(levels=2, width=MAX_ALIAS_EXPANSIONS + 1))
    with pytest.raises(ConfigError, match="alias"):
        read_yaml(path)


@pytest.mark.parametrize("recursive", ["x: &a [1, *a]", "x: &a {y: {z: *a}}"])
def test_a_recursive_alias_is_refused(capsys, tmp_path, recursive) -> None:
    path = tmp_path / "recursive.yaml"
    path.write_text(QUICK.read_text() + recursive + "\n")
    message = check(capsys, path)
    assert message.startswith(f"{path}:") and "*a is an alias inside the node it names" in message, message


@pytest.mark.parametrize(
    "content, expected",
    [
        ("- run: quick\n- grids: {}\n", "the file holds a list"),
        ("", "the file holds nothing"),
        ("just text\n", "the file holds a string"),
        (QUICK.read_text().replace("# Run", "# Caf\xe9 run").encode("latin-1"), ":1: not UTF-8 text (byte 0xe9"),
        (b"run: quick\n\x00\x01\xff\xfe", ":2: not UTF-8 text (byte 0xff"),
        (b"run: quick\n\x00\x01", "YAML error"),
    ],
    ids=["list", "empty", "scalar", "latin-1", "binary", "control characters"],
)
def test_a_file_that_is_no_config_is_named(capsys, tmp_path, content, expected) -> None:
    path = tmp_path / "config.yaml"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    message = check(capsys, path)
    assert message.startswith(str(path)) and expected in message, message


# -- planning catches what jobs would refuse --------------------------------------------------


def edit(path: str, value: Any):
    """An edit setting the dotted ``path`` (created as needed) to ``value``."""

    def apply(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return apply


def drop(path: str):
    def apply(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for part in parents:
            node = node[part]
        del node[last]

    return apply


def on_corpus(settings: dict):
    """The llama grid trains on a ``corpus`` data set of ``settings``."""

    def apply(config: dict) -> None:
        config["datasets"] = {"mnist5k": config["datasets"]["mnist5k"], "corpus": settings}
        config["grids"]["llama_stdlib"]["dataset"] = "corpus"

    return apply


def rename_grid(config: dict) -> None:
    config["grids"] = {("g\n" if name == "resnet_mnist" else name): grid for name, grid in config["grids"].items()}


A_DIRECTORY = "<a directory>"  # replaced by tmp_path

PLANNING = {
    # case -> (edit, texts the one line holds: the key and value, then what is allowed)
    "seed 1.0": (edit("grids.resnet_mnist.seeds", [1.0]), ["grids.resnet_mnist.seeds[0]: 1.0 is not an integer"]),
    "train_pool 24.0": (
        edit("measure.train_pool", 24.0),
        ["measure.train_pool: 24.0 is not an integer", "allowed: an integer from 4 to"],
    ),
    "threads 2.0": (edit("threads", 2.0), ["threads: 2.0 is not an integer", "from 1 to 1024"]),
    "points 3.0": (
        edit("measure.points", 3.0),
        ["measure.points: 3.0 is not allowed", "allowed: 'all' or an integer from 1 to 100000 or a list"],
    ),
    "test_examples 10.0": (
        edit("grow.heldout", 10.0),
        ["grow.heldout: 10.0 is not an integer"],
    ),
    "views []": (edit("intervene.views", []), ["intervene.views: [] is empty", "['full', 'pooled']"]),
    "views twice": (edit("intervene.views", ["full", "full"]), ["intervene.views", "non-unique"]),
    "llama without block_size": (
        drop("grids.llama_stdlib.model.block_size"),
        ["grids.llama_stdlib.model.block_size: not set", "allowed: an integer from 2 to"],
    ),
    "augment on text": (
        edit("grids.llama_stdlib.recipe.augment", True),
        ["grids.llama_stdlib.recipe.augment: true", "allowed here: auto or false"],
    ),
    "corpus without path": (on_corpus({}), ["datasets.corpus.path: not set; source corpus reads it"]),
    "corpus path a directory": (
        on_corpus({"path": A_DIRECTORY}),
        ["datasets.corpus.path:", "is a directory; allowed: a local file"],
    ),
    "tinyshakespeare path a directory": (
        edit("datasets.tinyshakespeare", {"path": A_DIRECTORY}),
        ["datasets.tinyshakespeare.path:", "is a directory"],
    ),
    "run with a newline": (edit("run", "quick\n"), ["run: 'quick\\n' does not match", "allowed: letters, digits"]),
    "grid name with a newline": (rename_grid, ["grids: the name 'g\\n' does not match", "allowed: letters"]),
    "checkpoint name with a newline": (
        edit("pretrained", {"p": {"dataset": "pystdlib", "checkpoints": {"m\n": {"checkpoint": "x"}}}}),
        ["pretrained.p.checkpoints: the name 'm\\n'"],
    ),
    "cpu_partition with a newline": (
        edit("cluster.cpu_partition", "cpu\n"),
        ["cluster.cpu_partition: 'cpu\\n' does not match", "without whitespace"],
    ),
    "account with a bell": (edit("cluster.account", "lab\a"), ["cluster.account: 'lab\\x07'", "control characters"]),
    "url with a newline": (
        edit("datasets.tinyshakespeare", {"url": "http://\nfile:///etc/passwd"}),
        ["datasets.tinyshakespeare.url: 'http://\\nfile:///etc/passwd' holds whitespace", "allowed: an http://"],
    ),
    "url of a file": (edit("datasets.tinyshakespeare", {"url": "file:///etc/passwd"}), ["has scheme 'file'"]),
    "url without a host": (edit("datasets.tinyshakespeare", {"url": "https:///input.txt"}), ["names no host"]),
    "url with a line separator": (
        edit("datasets.tinyshakespeare", {"url": "https://a.org/\u2028x"}),
        ["holds whitespace or control characters"],
    ),
    "url with a bad port": (edit("datasets.tinyshakespeare", {"url": "http://host:x/a"}), ["does not parse"]),
    "resnet depth 600002": (
        edit("grids.resnet_mnist.depths", [600002]),
        ["grids.resnet_mnist.depths[0]: 600002 is greater than the maximum of 10000"],
    ),
    "llama depth 1000000": (
        edit("grids.llama_stdlib.depths", [1000000]),
        ["grids.llama_stdlib.depths[0]: 1000000 is greater than the maximum of 10000"],
    ),
    "width 1e6": (edit("grids.llama_stdlib.widths", [1048576]), ["grids.llama_stdlib.widths[0]: 1048576", "65536"]),
    "batch size 1e7": (edit("measure.batch_size", 10**7), ["measure.batch_size: 10000000", "maximum of 65536"]),
    "tokens 1e18": (edit("grids.llama_stdlib.recipe.tokens", 10**18), ["grids.llama_stdlib.recipe.tokens"]),
    "block_size 1e6": (edit("grids.llama_stdlib.model.block_size", 10**6), ["model.block_size: 1000000"]),
    "seed 2**64": (edit("measure.seed", 2**64), ["measure.seed: 18446744073709551616", "4294967295"]),
}


@pytest.mark.parametrize("name", sorted(PLANNING))
def test_check_refuses_in_one_line_what_a_job_would(capsys, tmp_path, name) -> None:
    apply, expected = PLANNING[name]
    config = quick()
    apply(config)
    for settings in config["datasets"].values():
        if settings.get("path") == A_DIRECTORY:
            settings["path"] = str(tmp_path)
    start = time.process_time()
    message = check(capsys, write(tmp_path / "config.yaml", config))
    assert time.process_time() - start < 10, "planning took long"
    assert message.startswith("invalid config: "), message
    for text in expected:
        assert text in message, f"{text!r} not in: {message}"


def test_what_stays_valid() -> None:
    config = quick()
    config["grids"]["llama_stdlib"]["recipe"]["lr"] = 1  # a number key takes an integer
    config["datasets"]["tinyshakespeare"] = {"url": "https://example.org:8443/data/input.txt?x=1"}
    config["intervene"]["views"] = ["pooled"]
    config["cluster"] = {"cpu_partition": "cpu-long", "account": "lab_1"}
    validate_config(config)


def test_a_prepare_job_says_a_directory_is_a_directory(tmp_path) -> None:
    with pytest.raises(DataError, match=f"corpus: {tmp_path} is a directory"):
        text_data._text_file("corpus", {"path": str(tmp_path)}, tmp_path, True)


# -- the schema's own guarantees --------------------------------------------------------------


def nodes(node: Any, path: str = "") -> list[tuple[str, dict]]:
    """Every schema node under ``node`` with its path."""
    found = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, sub in node.items():
            found += nodes(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            found += nodes(sub, f"{path}/{i}")
    return found


def test_every_pattern_matches_the_whole_text() -> None:
    patterns = {n["pattern"] for _, n in nodes(schema()) if isinstance(n.get("pattern"), str)}
    assert patterns and patterns == set(PATTERNS), "a new pattern needs its words in schema.PATTERNS"
    for pattern in patterns:
        assert pattern.startswith("^") and pattern.endswith("\\Z") and "$" not in pattern, pattern


def test_every_integer_and_width_has_an_upper_bound() -> None:
    integers = [(p, n) for p, n in nodes(schema()) if "integer" in str(n.get("type", ""))]
    assert len(integers) > 40
    unbounded = [p for p, n in integers if "maximum" not in n]
    assert not unbounded, unbounded
    assert "maximum" in schema()["$defs"]["grid"]["properties"]["widths"]["items"]


# -- insertion points from the depth alone ----------------------------------------------------


@pytest.mark.parametrize("family", TRAINED)
def test_point_names_from_the_depth_are_the_models_own(family) -> None:
    """At the shallowest and deepest depth up to 60 the family accepts, the names the config checks count
    from the depth alone are those its model, built on the meta device, gives its blocks."""
    depths = accepted_depths(family)
    for depth in (depths[0], depths[-1]):
        built = meta_model({"family": family, "depth": depth}).insertion_points()
        assert list(insertion_points(family, depth)) == built, (family, depth)


def test_the_deepest_allowed_models_plan_at_once() -> None:
    resnet, llama = quick(), quick()
    del resnet["grids"]["llama_stdlib"], resnet["datasets"]["pystdlib"]
    resnet["grids"]["resnet_mnist"]["depths"] = [9998]  # 6n+2 at the bound: 3 x 1666 blocks
    resnet["measure"]["points"], resnet["grow"]["points"] = ["stage3.block1666"], 4998
    del llama["grids"]["resnet_mnist"], llama["datasets"]["mnist5k"]
    llama["grids"]["llama_stdlib"]["depths"] = [10000]
    llama["measure"]["points"], llama["grow"]["points"] = ["layer.9999"], 10000
    del llama["grow"]["grids"]  # its default: every trained grid
    resnet["grow"]["grids"] = ["resnet_mnist"]
    start = time.process_time()
    validate_config(copy.deepcopy(resnet))
    validate_config(copy.deepcopy(llama))
    resnet["measure"]["points"] = ["stage3.block1667"]
    with pytest.raises(ConfigError, match=r"'stage3.block1667' is not an insertion point of resnet-d9998.*4998 points"):
        validate_config(resnet)
    llama["grow"]["points"] = 10001
    with pytest.raises(ConfigError, match=r"grow.points: 10001 is more than the 10000 insertion points"):
        validate_config(llama)
    assert time.process_time() - start < 10


# -- through snakemake -n ---------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "case",
    ["yte as the default config", "a list as the default config", "yte given with --configfile", "train_pool 24.0"],
)
def test_snakemake_plans_nothing_of_a_hostile_config(tmp_path, case) -> None:
    """The Snakefile refuses each with the line ``scalemech check`` gives (the default config before
    Snakemake loads it). A YTE template given with --configfile is evaluated by Snakemake's command
    line before the Snakefile runs: refused, but after its expression ran (docs/running.md: a config from
    someone else goes through scalemech check first)."""
    marker, configfile = tmp_path / "PWNED", []
    if case == "train_pool 24.0":
        configfile = ["--configfile", str(write(tmp_path / "pool.yaml", {**quick(), "measure": {"train_pool": 24.0}}))]
        expected = "measure.train_pool: 24.0 is not an integer"
    elif case == "yte given with --configfile":
        (tmp_path / "yte.yaml").write_text(yte_config(marker))
        configfile, expected = ["--configfile", str(tmp_path / "yte.yaml")], "yte.yaml:1: __use_yte__"
    else:
        (tmp_path / "config").mkdir()
        default = tmp_path / "config" / "config.yaml"
        if case == "a list as the default config":
            default.write_text("- run: quick\n")
            expected = "config/config.yaml: the file holds a list"
        else:
            default.write_text(yte_config(marker))
            expected = "config/config.yaml:1: __use_yte__"
    result = snakemake("-n", "--cores", "1", "--directory", str(tmp_path), *configfile, timeout=280)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and expected in output, output[-3000:]
    refusal = next(line for line in output.splitlines() if expected in line)
    assert "allowed" in refusal, output[-3000:]  # the one line names the file or key, the value and what is allowed
    assert "Building DAG" not in output and "train_model" not in output, output[-3000:]
    if case == "yte given with --configfile":
        assert marker.exists(), "Snakemake no longer evaluates YTE first: update docs/running.md and Snakefile"
    else:
        assert not marker.exists()


# -- what Snakemake's command line does with a --configfile, before any workflow code ---------
# In-process: snakemake.cli builds ConfigSettings(configfiles=...), which loads and merges them.


@pytest.mark.timeout(60)
def test_snakemake_expands_an_alias_bomb_of_mappings_itself(tmp_path) -> None:
    """docs/running.md: Snakemake's loader reads aliases by reference, but merging the file into its config
    (``snakemake.utils.update_config``) copies every mapping, so a bomb of mappings is expanded
    before the Snakefile can refuse it; aliased lists stay shared, and common.smk refuses them."""
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(levels=4, width=3, kind="mapping"))
    loaded = load_configfile(path)
    assert loaded["l3"]["k0"] is loaded["l3"]["k1"]
    merged = ConfigSettings(configfiles=[path]).overwrite_config
    assert merged["l3"]["k0"] is not merged["l3"]["k1"], "no longer expanded: update docs/running.md"
    path.write_text(alias_bomb(levels=4, width=3))
    merged = ConfigSettings(configfiles=[path]).overwrite_config
    assert merged["l3"][0] is merged["l3"][1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "content, error, expected",
    [
        ("- run: quick\n", WorkflowError, "Config file must be given as JSON or YAML with keys at top level."),
        ("", WorkflowError, "Config file must be given as JSON or YAML with keys at top level."),
        ("# Caf\xe9\n".encode("latin-1") + QUICK.read_bytes(), UnicodeDecodeError, "can't decode byte 0xe9"),
    ],
    ids=["list", "empty", "latin-1"],
)
def test_snakemake_fails_itself_on_a_configfile_of_no_mapping_or_not_utf8(tmp_path, content, error, expected) -> None:
    """docs/running.md: Snakemake's loader fails on these before any workflow code, without naming the file
    (and a UnicodeDecodeError is no WorkflowError: snakemake prints its traceback); ``scalemech
    check`` names it (test_a_file_that_is_no_config_is_named)."""
    path = tmp_path / "config.yaml"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(error) as raised:
        ConfigSettings(configfiles=[path])
    assert expected in str(raised.value) and str(path) not in str(raised.value), "now named: update docs/running.md"
