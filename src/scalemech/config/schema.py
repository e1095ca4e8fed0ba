"""The config schema shipped with the package, and a jsonschema validator that fills in each default
and explains a violation in one line that names the key."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import yaml


@cache
def schema() -> dict[str, Any]:
    """The config schema shipped with the package (``workflow/schemas/`` links to it)."""
    return yaml.safe_load(resources.files("scalemech").joinpath("schemas", "config.schema.yaml").read_text())


def _with_defaults(validator_class: type) -> type:
    """Extend a jsonschema validator so that ``properties`` fills in each ``default``."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, subschema) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, subschema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _where(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "<top level>"


def _explain(error: jsonschema.ValidationError) -> str:
    """One line that names the key and what is allowed there."""
    where, schema_ = _where(error), error.schema
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(schema_.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        return f"{where}: unknown key(s) {unknown}; allowed keys: {allowed}"
    if error.validator == "oneOf":
        options = [sub.get("required") or sub.get("const") or sub.get("type") for sub in schema_["oneOf"]]
        return f"{where}: {error.instance!r} must match exactly one of {options}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    return f"{where}: {error.message}"
