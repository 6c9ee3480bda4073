"""``verify``: the certificate of a table of any kind, given as a file or as parameters and values; a file is
accepted only as darrm-opt writes it (:mod:`darrm_opt.release.document_check`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from darrm_opt.certify.verdict import Verdict
from darrm_opt.errors import InvalidParameter, TableFileError, TableFileMismatch
from darrm_opt.mechanisms import mechanism_for, read_document


@dataclass(frozen=True)
class FileVerdict:
    """What ``verify`` found for a table file: its kind (``mechanism``), parameters, γ, recomputed
    ``certificate``, the verdict on its stored privacy profile (``profile_check``: a
    :class:`darrm_opt.privacy.statements.ProfileCheck`, None when the file has none or the table is not
    certified) and the form it was compared as (None when the table is not certified: such a file is not
    darrm-opt's, and the certificate says why)."""

    mechanism: Any
    params: Any
    gamma: Any
    certificate: Verdict
    profile_check: Any = None
    form: str | None = None

    @property
    def valid(self) -> bool:
        """Certified, and its stored profile (if any) proven."""
        return bool(self.certificate.certified) and (self.profile_check is None or self.profile_check.valid)


def verify_file(path: str | Path, **options: Any) -> FileVerdict:
    """Verify a table file of any kind: recompute its certificate; when it certifies, prove every statement of
    its stored privacy profile (``Mechanism.check_profile``) and, when those hold, compare the whole file with
    the document darrm-opt writes for the recomputed table (:func:`darrm_opt.release.document_check.check_document`):
    a missing or unknown field or an unknown ``schema_version`` raises TableFileError (exit 2), a value that
    differs from the recomputed one TableFileMismatch (exit 1), each naming the field. An unreadable file
    raises TableFileError as :func:`darrm_opt.release.table_file.load_any_table` does. ``options`` go to the
    certificate's sweep (``executor``, ``progress``, ``workers``); the profile check takes the executor."""
    from darrm_opt.privacy.profile import profile_from_dict
    from darrm_opt.release.document_check import DocumentRecheck, check_document
    from darrm_opt.release.table_file import read_table_document

    source = f"table file {str(path)!r}"
    data = read_table_document(path)
    m, params, gamma = read_document(data, source)
    cert = m.certify(params, gamma, **options)
    if not cert.certified:
        return FileVerdict(m, params, gamma, cert)
    stored = data.get("privacy_profile")
    profile, check = None, None
    if stored is not None:
        try:
            profile = profile_from_dict(stored)
        except InvalidParameter as exc:
            raise TableFileError(f"{source}: invalid privacy_profile: {exc.rule}") from None
        check = m.check_profile(params, gamma, profile, cert, executor=options.get("executor"))
        if not check.valid:
            return FileVerdict(m, params, gamma, cert, check)
    try:
        table = m.table(params, gamma, cert, data.get("teachers") or None, profile)
    except InvalidParameter as exc:
        raise TableFileError(f"{source}: {exc}") from None
    try:
        form = check_document(DocumentRecheck(data, m, params, gamma, cert, table, source))
    except TableFileMismatch as exc:
        # a file written before the structured sweep's reflection states certificates of the full tables (its
        # own and its baselines'): the same verdicts, their maxima's last bits and their ties' order those of
        # that sweep; recomputed so, the whole document in that context
        if "certificate" not in exc.field:
            raise
        from darrm_opt.certify.structured import full_tables

        with full_tables():
            full = m.certify(params, gamma, **options)
            if not full.certified:
                raise
            table = m.table(params, gamma, full, data.get("teachers") or None, profile)
            try:
                form = check_document(DocumentRecheck(data, m, params, gamma, full, table, source))
            except TableFileMismatch:
                raise exc from None  # the difference from this release's computation is the one to report
        cert = full
    return FileVerdict(m, params, gamma, cert, check, form.name)


def verify(table: Any, gamma: Any = None, **options: Any) -> Verdict:
    """Recompute the privacy certificate of a table with its kind's certification
    (:class:`darrm_opt.mechanisms.base.Mechanism`).

    ``verify("table.json")`` verifies a table file of any kind as ``darrm-opt verify`` does
    (:func:`verify_file`: a file is accepted only as darrm-opt writes it; its stored privacy profile must be
    proven, else TableFileMismatch naming ``privacy_profile``); ``verify(params, gamma)`` checks K + 1 values
    for ``params``. For a DaRRM table the table is (mε, δ)-DP iff ``certified``: every corner multiset's
    privacy cost f(n) = Σ_l s_l γ(l)(α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is at most e^{mε} − 1 + 2δ; a
    PATE-setting table is checked over every (l, l ± 1) pair and output, a multi-class one over every
    neighbouring histogram type. ``options`` go to the sweep of kinds that sweep (``executor``, ``progress``,
    ``workers``)."""
    if isinstance(table, (str, Path)):
        if gamma is not None:
            raise TypeError("verify(path): gamma comes from the file")
        result = verify_file(table, **options)
        check = result.profile_check
        if check is not None and not check.valid:
            raise TableFileMismatch(f"table file {str(table)!r}: its privacy_profile is not proven: {check.message()}",
                                    "privacy_profile")
        return result.certificate
    if gamma is None:
        raise TypeError("verify(params, gamma): gamma is required with parameters")
    return mechanism_for(table).certify(table, gamma, **options)
