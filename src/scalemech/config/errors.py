"""The one error of a configuration that cannot run."""


class ConfigError(ValueError):
    """A configuration that does not match ``config.schema.yaml`` or the cross-checks."""
