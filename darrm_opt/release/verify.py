"""``verify``: the certificate of a γ table given as a file or as parameters and values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.pairs import certify_pairs
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.release.table_file import load_any_table


def verify(table: Params | str | Path, gamma: Any = None, **kwargs: Any) -> Any:
    """Recompute the privacy certificate of a γ table by the exhaustive sweep of :func:`certify`.

    ``verify("table.json")`` reads a table file (see :func:`load_table`); ``verify(params, gamma)`` checks
    K + 1 values for ``params``. The table is (mε, δ)-DP iff ``certified``: every corner multiset's
    privacy cost f(n) = Σ_l s_l γ(l)(α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is at most e^{mε} − 1 + 2δ.
    ``kwargs`` go to :func:`certify` (``executor``, ``progress``, ``workers``). A PATE-setting file
    (``"teachers": "disjoint-nonprivate"``) is checked over every (l, l ± 1) pair and output instead
    (:func:`~darrm_opt.certify.pairs.certify_pairs`), which returns a PairCertificate; a multi-class file over
    every neighbouring histogram type (a MulticlassCertificate)."""
    if isinstance(table, Params):
        if gamma is None:
            raise TypeError("verify(params, gamma): gamma is required with Params")
        return certify(table, gamma, **kwargs)
    if gamma is not None:
        raise TypeError("verify(path): gamma comes from the file")
    params, values = load_any_table(table)
    if isinstance(params, PateParams):
        return certify_pairs(params, values)
    if not isinstance(params, Params):  # a multi-class table: every neighbouring histogram type
        from darrm_opt.certify.multiclass import certify_multiclass

        return certify_multiclass(params, values)
    return certify(params, values, **kwargs)
