"""``scalemech certify``: where growing a user's own checkpoint can pay off.

Per insertion point of a scalemech ``model.pt`` or a Hugging Face decoder LM, on a prepared
dataset, a text file or token ids: the alignment statistics of the train pool with intervals,
the two-sample certificate ``B_exact`` from the train × test cross-Gram at the user's ``(M, K)``
(beside the one-sample ``B_exact_common``, ``B_align``), the first-order gain of a
zero-initialized block inserted there (docs/science.md §3, §5), and a verdict per point
(``verdict``, the rule below) with a one-line recommendation.

Verdict rule (``verdict``), per point, from the numbers in its row:

- ``"grow here"``: the ``‖μ‖²`` interval lies above 0 (a mean gradient is detected,
  ``mu_sq_lo > 0``), the two-sample certificate bounds the misalignment probability at
  ``(M, K)`` below ``B_GROW`` (``b_exact < 0.5``: a step along the mean gradient of ``M`` train
  examples lowers the loss of ``K`` test examples, to first order, more often than not) and a
  zero-initialized block there gets a gradient (``block_grad_norm > 0``, Paper D's Condition 1);
- ``"weak"``: only the ``‖μ‖²`` interval or only the certificate holds;
- ``"no detectable signal"``: neither.

The recommendation names the "grow here" points, ranked by ``block_grad_norm`` (the largest
first-order gain first), or says that no point has a detectable signal.

Modules: ``inputs`` (the model and data given), ``measurement`` (``certify``, ``certify_model`` of a
model already loaded, ``stored_certificate`` from the pools ``measure`` stored, ``point_row``),
``verdict`` (the rule above) and ``text`` (``format_certificate``).
"""

from .measurement import CERTIFICATE_COLUMNS, Sampling, certify, certify_model, point_row, stored_certificate
from .text import format_certificate, recommendation
from .verdict import B_GROW, GROW, NO_SIGNAL, VERDICTS, WEAK, grow_ranking, point_ranks, verdict

__all__ = [
    "B_GROW",
    "CERTIFICATE_COLUMNS",
    "GROW",
    "NO_SIGNAL",
    "VERDICTS",
    "WEAK",
    "certify",
    "Sampling",
    "certify_model",
    "stored_certificate",
    "format_certificate",
    "grow_ranking",
    "point_ranks",
    "point_row",
    "recommendation",
    "verdict",
]
