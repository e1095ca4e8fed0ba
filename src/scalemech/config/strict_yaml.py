"""YAML read strictly: a key given twice is refused, and a syntax error names the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    PyYAML (and Snakemake's ``--configfile``) silently keep the last of two equal keys, so a
    second ``depths:`` in a grid replaces the first unseen. Here it raises ``ConfigError``
    naming the key, the mapping's path, the file and both lines. Keys brought in by a merge
    (``<<: *anchor``) may still be overridden, as YAML intends.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()
        self._root: yaml.Node | None = None

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        return super().construct_document(node)

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

    Raises ``ConfigError`` with the file and line for a duplicated key or a syntax error.
    """
    with open(path, encoding="utf-8") as handle:
        try:
            return yaml.load(handle, Loader=StrictLoader)
        except yaml.YAMLError as error:
            raise ConfigError(_yaml_error(error, path)) from None
