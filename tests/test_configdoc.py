"""Every config key is described in the schema, and config/README.md is rendered from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scalemech.config import doc as configdoc
from scalemech.config.schema import schema

ROOT = Path(__file__).resolve().parents[1]


def properties(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(key path, subschema)`` of every property at every level, ``$defs`` entries included."""
    if not isinstance(node, dict):
        return
    prefix = f"{path}." if path else ""
    for name, sub in node.get("$defs", {}).items():
        yield f"$defs.{name}", sub
        yield from properties(sub, f"$defs.{name}")
    for name, sub in node.get("properties", {}).items():
        yield f"{prefix}{name}", sub
        yield from properties(sub, f"{prefix}{name}")
    yield from properties(node.get("additionalProperties"), f"{prefix}<name>")
    yield from properties(node.get("items"), f"{path}[]")
    for i, sub in enumerate(node.get("oneOf", [])):
        yield from properties(sub, f"{path}<oneOf {i}>")


def test_every_key_has_a_description():
    keys = list(properties(schema()))
    assert len(keys) > 100  # the walk reaches every level
    missing = [path for path, sub in keys if not (isinstance(sub, dict) and str(sub.get("description") or "").strip())]
    assert not missing, f"config keys without a description in config.schema.yaml: {missing}"


def test_no_key_lost_to_yaml_flow_style():
    """``{description: a, b}`` in YAML flow style is the description ``a`` and a stray key ``b: null``."""
    stray = [
        f"{path}.{key}"
        for path, sub in [("", schema()), *properties(schema())]
        if isinstance(sub, dict)
        for key, value in sub.items()
        if value is None and key != "default"
    ]
    assert not stray, f"keys with no value (a comma in an unquoted flow-style description?): {stray}"


def test_readme_is_rendered_from_the_schema():
    readme = ROOT / "config" / "README.md"
    assert readme.read_text(encoding="utf-8") == configdoc.render(schema()), (
        "config/README.md is stale: run python -m scalemech.config.doc"
    )


def test_render_lists_every_key():
    text = configdoc.render(schema())
    for name in schema()["properties"]:
        assert f"## `{name}`" in text and f"| `{name}` |" in text
    for name in schema()["$defs"]:
        assert f"### `{name}`" in text
    assert "| `measure.train_pool` | integer in [4, 1000000] | `256` |" in text
    assert "| `checkpoints.<name>.revision` | string or null | `null` |" in text
    assert "| `optimizer` | `sgd`, `adamw` | *required* |" in text


def test_check_fails_on_a_stale_file(tmp_path, capsys):
    out = tmp_path / "README.md"
    configdoc.main(["--output", str(out)])
    configdoc.main(["--check", "--output", str(out)])  # fresh: passes
    out.write_text(out.read_text() + "edited by hand\n")
    with pytest.raises(SystemExit) as stop:
        configdoc.main(["--check", "--output", str(out)])
    assert stop.value.code == 1 and str(out) in capsys.readouterr().err


def test_workflow_schema_link():
    link = ROOT / "workflow" / "schemas" / "config.schema.yaml"
    assert link.is_symlink() and link.resolve() == (ROOT / "src" / "scalemech" / "schemas" / "config.schema.yaml")
