"""The workflow configuration: strict YAML, validation against the JSON schema, planning-time
cross-checks, and the job grids.

``validate_config`` is the first thing the Snakefile and the CLI call: a typo'd key, a
negative width or an unknown dataset fails before any job is planned, with the key's
path (``grids.resnet_mnist.widths[0]``) and what is allowed. Past the schema it checks what
the schema cannot express but the config alone decides (``cross_checks``): each family's
own architecture rules (read from the families' torch-free config dataclasses), family against
the kind of data, insertion-point names, pool and batch sizes against the splits whose size
is known before the data are prepared. ``read_yaml`` refuses a key given twice, a YTE template
(``__use_yte__``), an alias bomb and text that is not UTF-8, and names the file and line of a YAML
syntax error; ``read_config`` (used by ``load_config`` and the workflow) adds a file holding no mapping.
``model_jobs`` expands the grids and pretrained groups into one ``ModelJob`` per (dataset,
family, depth, width, seed) — the unit of training, measurement and every experiment after it.

Modules: ``strict_yaml``, ``schema`` (the schema and its validator), ``checks`` (the cross-checks),
``cluster`` (cluster requests and their limits), ``grids`` (``ModelJob``), ``validation``
(``read_config``, ``validate_config``, ``load_config``), ``errors`` and ``doc`` (writes config/README.md).
"""

from .cluster import cluster_requests, gpu_share
from .errors import ConfigError
from .grids import ModelJob, format_width, model_jobs
from .strict_yaml import read_yaml
from .validation import load_config, read_config, validate_config

__all__ = [
    "ConfigError",
    "ModelJob",
    "cluster_requests",
    "gpu_share",
    "format_width",
    "load_config",
    "model_jobs",
    "read_config",
    "read_yaml",
    "validate_config",
]
