"""YAML read strictly: a key given twice is refused, a syntax error names the file and line, a config
is data (no YTE template) and YAML aliases are bounded (no alias bomb)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

MERGE_TAG = "tag:yaml.org,2002:merge"
# Alias expansions a file may make: an alias counts once plus the expansions inside the node it
# names, so nine levels of nine aliases (an alias bomb: 9**9 leaves from a 1 kB file) count
# hundreds of millions. A config uses a handful (config/paper.yaml: one merge).
MAX_ALIAS_EXPANSIONS = 100
# Snakemake's config loader (yte.process_yaml) evaluates the values of a file holding this
# top-level key as Python expressions.
YTE_KEY = "__use_yte__"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    PyYAML (and Snakemake's ``--configfile``) silently keep the last of two equal keys, so a
    second ``depths:`` in a grid replaces the first unseen. Here it raises ``ConfigError``
    naming the key, the mapping's path, the file and both lines. Keys brought in by a merge
    (``<<: *anchor``) may still be overridden, as YAML intends.

    It also refuses a top-level ``__use_yte__``, written or merged in (a config is data, never
    a template Snakemake would evaluate), and more than ``MAX_ALIAS_EXPANSIONS`` alias
    expansions (counted while composing, before anything is constructed, so an alias bomb is
    refused at once), and an alias inside the node it names (a recursive structure).
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()
        self._root: yaml.Node | None = None
        self._expansions = 0  # alias expansions so far, each counting those inside its node
        self._inside: dict[str, int] = {}  # anchor -> expansions inside the node it names
        self._open: set[str] = set()  # anchors of the nodes being composed (an alias to one recurses)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                mark = event.start_mark
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}: *{event.anchor} is an alias inside the node it names (a "
                    "recursive structure, endless to read); allowed: aliases of nodes that end before them"
                )
            node = super().compose_node(parent, index)  # an undefined alias is PyYAML's error
            self._expansions += 1 + self._inside.get(event.anchor, 0)
            if self._expansions > MAX_ALIAS_EXPANSIONS:
                mark = event.start_mark
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}: YAML aliases expand to more than {MAX_ALIAS_EXPANSIONS} copies "
                    f"(*{event.anchor} here; an alias bomb?); allowed: at most {MAX_ALIAS_EXPANSIONS} alias "
                    "expansions in a config, counting the aliases inside each node an alias copies"
                )
            return node
        before, anchor = self._expansions, getattr(event, "anchor", None)
        if anchor is not None:
            self._open.add(anchor)
        node = super().compose_node(parent, index)
        if anchor is not None:
            self._open.discard(anchor)
            self._inside[anchor] = self._expansions - before
        return node

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        data = super().construct_document(node)  # plain values only (SafeLoader): nothing runs
        if isinstance(data, dict) and YTE_KEY in data:  # written at the top level or merged into it
            keys = [k for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.value == YTE_KEY]
            mark = (keys[0] if keys else node).start_mark
            raise ConfigError(
                f"{mark.name}:{mark.line + 1}: {YTE_KEY} makes Snakemake evaluate the file's values as Python "
                f"(a YTE template); a scalemech config is data: allowed: plain YAML, without {YTE_KEY} or ?-expressions"
            )
        return data

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Called on every mapping before it is constructed and before its merges are
        # resolved (merged keys join node.value then), so only the written keys are compared.
        if id(node) not in self._checked:
            self._checked.add(id(node))
            self._refuse_duplicates(node)
        super().flatten_mapping(node)

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = key in first_line
            except TypeError:  # an unhashable key: construct_mapping reports it
                continue
            mark = key_node.start_mark
            if seen:
                where = _node_path(self._root, node)
                raise ConfigError(
                    f"{mark.name}:{mark.line + 1}: duplicate key {key!r}"
                    f"{f' in {where}' if where else ' at the top level'} (first given on line "
                    f"{first_line[key]}); a YAML mapping takes each key once, remove one of them"
                )
            first_line[key] = mark.line + 1


def _node_path(root: yaml.Node | None, target: yaml.Node) -> str:
    """``grids.resnet_mnist`` for the mapping node ``target`` under ``root`` ('' for the root)."""
    seen: set[int] = set()

    def walk(node: yaml.Node, path: str) -> str | None:
        if node is target:
            return path
        if id(node) in seen:
            return None
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            children = [(f"{path}.{k.value}" if path else str(k.value), v) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(node.value)]
        else:
            return None
        for child_path, child in children:
            found = walk(child, child_path)
            if found is not None:
                return found
        return None

    return (walk(root, "") if root is not None else None) or ""


def _yaml_error(error: yaml.YAMLError, path: str | Path) -> str:
    """One line: ``file:line:column: YAML syntax error: problem (context)``."""
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return f"{path}: YAML error: {' '.join(str(error).split())}"
    problem = " ".join(str(getattr(error, "problem", None) or error).split())
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context:
        context = f" ({context}{f' started on line {context_mark.line + 1}' if context_mark else ''})"
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}: YAML syntax error: {problem}{context or ''}"


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``, read with ``StrictLoader``.

    Raises ``ConfigError`` naming the file (and the line where there is one) for a duplicated
    key, a syntax error, text that is not UTF-8, ``__use_yte__`` or too many alias expansions.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            return yaml.load(handle, Loader=StrictLoader)
        except yaml.YAMLError as error:
            raise ConfigError(_yaml_error(error, path)) from None
        except UnicodeDecodeError:
            raise ConfigError(_not_utf8(path)) from None


def _not_utf8(path: str | Path) -> str:
    """One line: the file, line and byte where ``path`` stops being UTF-8 text."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, byte = data.count(b"\n", 0, error.start) + 1, data[error.start]
        return f"{path}:{line}: not UTF-8 text (byte {byte:#04x} at offset {error.start}); allowed: a UTF-8 YAML file"
    return f"{path}: not UTF-8 text; allowed: a UTF-8 YAML file"
