"""The config schema shipped with the package, and a jsonschema validator that fills in each default,
takes integers strictly (``1.0`` is not one) and explains a violation in one line that names the key,
the value and what is allowed."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import yaml

from ..core.steps import EXPERIMENTS
from ..data import SOURCES, config_keys
from ..models import FAMILIES


def _grouped(named: dict[str, str]) -> str:
    """``a, b: x; c: y`` for ``{a: x, b: x, c: y}``: names that share a value listed together."""
    groups: dict[str, list[str]] = {}
    for name, value in named.items():
        groups.setdefault(value, []).append(name)
    return "; ".join(f"{', '.join(names)}: {value}" for value, names in groups.items())


@cache
def schema() -> dict[str, Any]:
    """The config schema shipped with the package (``workflow/schemas/`` links to it), with what the
    registries hold filled in: the ``experiments`` the pipeline's steps declare (``core.steps.EXPERIMENTS``)
    as its allowed values and its default, the data sets' sources (``data.SOURCES``) and each one's keys,
    and the trained families (``models.FAMILIES``) with the kind of data each trains on."""
    loaded = yaml.safe_load(resources.files("scalemech").joinpath("schemas", "config.schema.yaml").read_text())
    experiments = loaded["properties"]["experiments"]
    experiments["items"] = {"enum": list(EXPERIMENTS)}
    experiments["default"] = list(EXPERIMENTS)
    dataset = loaded["$defs"]["dataset"]
    dataset["properties"]["source"]["enum"] = list(SOURCES)
    keys = {source: ", ".join(config_keys(source)) or "no keys" for source in SOURCES}
    dataset["description"] = f"{dataset['description'].strip()}: {_grouped(keys)}"
    trained = {name: family.data for name, family in FAMILIES.items() if family.trained}
    family = loaded["$defs"]["grid"]["properties"]["family"]
    family["enum"] = list(trained)
    family["description"] = f"{family['description']} and the data it trains on: {_grouped(trained)}"
    return loaded


def _strict_integer(checker: Any, instance: Any) -> bool:
    """An ``int`` and not a ``bool``: jsonschema's own "integer" (JSON Schema's rule) also takes
    ``1.0``, which YAML reads as a float and ``range``, ``torch.manual_seed`` or a tensor shape refuse
    inside a job."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _with_defaults(validator_class: type) -> type:
    """Extend a jsonschema validator so that ``properties`` fills in each ``default`` and
    "integer" means an ``int`` (``_strict_integer``)."""
    validate_properties = validator_class.VALIDATORS["properties"]
    type_checker = validator_class.TYPE_CHECKER.redefine("integer", _strict_integer)

    def set_defaults(validator, properties, instance, subschema) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, subschema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults}, type_checker=type_checker)


def _where(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "<top level>"


# What each name pattern of the schema allows, in words (every pattern ends in \\Z, not $: under
# re.search, which jsonschema uses, $ also matches before a trailing newline).
PATTERNS = {
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z": "letters, digits, _ . - starting with a letter or digit",
    r"^[A-Za-z0-9_]+\Z": "letters, digits and _",
    r"^[A-Za-z0-9_.-]+\Z": "letters, digits, _ . -",
    r"^[^\s,\x00-\x1f\x7f]+\Z": "a name without whitespace, commas or control characters",
    r"^(best|pareto|top|adept|bi|(best|pareto|every):[1-9][0-9]*|layer\.(0|[1-9][0-9]*))\Z": (
        "best, pareto, top, adept, bi, best:K, pareto:K, every:K or layer.i (grow's --at rules)"
    ),
}
TYPES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


def _allowed_type(schema_: dict[str, Any]) -> str:
    """``an integer from 4 to 1000000``, ``a number > 0``, ``a string``: the node's type in words."""
    kinds = schema_["type"] if isinstance(schema_["type"], list) else [schema_["type"]]
    words = " or ".join(TYPES.get(kind, kind) for kind in kinds)
    low = schema_.get("minimum", schema_.get("exclusiveMinimum"))
    high = schema_.get("maximum", schema_.get("exclusiveMaximum"))
    if low is not None and high is not None and "minimum" in schema_ and "maximum" in schema_:
        return f"{words} from {low} to {high}"
    bounds = [f"{'>=' if 'minimum' in schema_ else '>'} {low}" if low is not None else ""]
    bounds.append(f"{'<=' if 'maximum' in schema_ else '<'} {high}" if high is not None else "")
    return " ".join([words, " and ".join(filter(None, bounds))]).strip()


def _option(sub: dict[str, Any]) -> str:
    """One alternative of a ``oneOf`` in words: ``'all'``, ``an integer from 1 to 100000``, ``a list``."""
    if "const" in sub:
        return repr(sub["const"])
    if "required" in sub:
        return f"a mapping with {sub['required']}"
    return _allowed_type(sub) if "type" in sub else str(sub)


def _explain(error: jsonschema.ValidationError) -> str:
    """One line that names the key, the value and what is allowed there."""
    where, schema_ = _where(error), error.schema
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return (
            f"{where}: {error.instance!r} is not {' or '.join(TYPES.get(k, k) for k in kinds)}; "
            f"allowed: {_allowed_type(schema_)}"
        )
    if error.validator == "pattern":
        name = "propertyNames" in error.relative_schema_path
        words = PATTERNS.get(error.validator_value, f"text matching {error.validator_value}")
        what = f"{'the name ' if name else ''}{error.instance!r}"
        return f"{where}: {what} does not match {error.validator_value}; allowed: {words}"
    if error.validator == "minItems":
        items = schema_.get("items", {})
        of = f" of {items['enum']}" if "enum" in items else ""
        size = "is empty" if not error.instance else f"has {len(error.instance)} item(s)"
        return f"{where}: {error.instance!r} {size}; allowed: a list of at least {error.validator_value}{of}"
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and "type" in schema_:
        return f"{where}: {error.message}; allowed: {_allowed_type(schema_)}"
    if error.validator == "uniqueItems":
        return f"{where}: {error.instance!r} has non-unique elements; allowed: each value once"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(schema_.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key(s) {unknown}; allowed keys: {allowed}"
    if error.validator == "oneOf":
        options = " or ".join(_option(sub) for sub in schema_["oneOf"])
        return f"{where}: {error.instance!r} is not allowed; allowed: {options}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    return f"{where}: {error.message}"
