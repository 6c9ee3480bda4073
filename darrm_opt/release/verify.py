"""``verify``: the certificate of a table of any kind, given as a file or as parameters and values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from darrm_opt.certify.verdict import Verdict
from darrm_opt.mechanisms import mechanism_for
from darrm_opt.release.table_file import load_any_table


def verify(table: Any, gamma: Any = None, **options: Any) -> Verdict:
    """Recompute the privacy certificate of a table with its kind's certification
    (:class:`darrm_opt.mechanisms.base.Mechanism`).

    ``verify("table.json")`` reads a table file of any kind (see :func:`load_any_table`); ``verify(params,
    gamma)`` checks K + 1 values for ``params``. For a DaRRM table the table is (mε, δ)-DP iff ``certified``:
    every corner multiset's privacy cost f(n) = Σ_l s_l γ(l)(α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is at most
    e^{mε} − 1 + 2δ; a PATE-setting table is checked over every (l, l ± 1) pair and output, a multi-class
    one over every neighbouring histogram type. ``options`` go to the sweep of kinds that sweep
    (``executor``, ``progress``, ``workers``)."""
    if isinstance(table, (str, Path)):
        if gamma is not None:
            raise TypeError("verify(path): gamma comes from the file")
        params, values = load_any_table(table)
    else:
        if gamma is None:
            raise TypeError("verify(params, gamma): gamma is required with parameters")
        params, values = table, gamma
    return mechanism_for(params).certify(params, values, **options)
