"""The mechanism interface: what every kind of release supplies.

A *mechanism* is one kind of release (a DaRRM table for teachers on shared data, a DaRRM table in the PATE
setting, a multi-class DaRRM table, ...). Each kind is one module with one subclass of :class:`Mechanism`
and one line in :mod:`darrm_opt.mechanisms.registry`; everything else (the CLI, the service, the ledger,
``verify``, ``budget``) goes through this interface and never tests which kind it holds.

A kind supplies:

- its parameter type, validated once (``params_from`` reads the wire and document form, ``params_type``'s
  ``canonical()`` writes it), and the teachers' settings it serves;
- its per-answer cost (ε₀, δ₀) and the limit its certificate must prove;
- ``solve`` (the optimal certified table), ``certify`` (a :class:`~darrm_opt.certify.verdict.Verdict`)
  and ``profile`` (its certified privacy profile, the dominating pair the ledger composes exactly);
- what drives the time and memory of its solve (``solve_cost_key``: the curve of measured solves it follows
  and its size on it, :mod:`darrm_opt.mechanisms.cost`);
- its sampler (answers with exact coins from a CSPRNG);
- its expected error under its prior, and its certificate read back from a document;
- how a served table of it looks on the wire (``output_model``: a model of :mod:`darrm_opt.mechanisms.outputs`
  with ``kind: Literal["<its name>"]``), the ``solve`` command's view of it (``solve_view``) and small
  instances of it (``examples``) that the tests serve through every front end.

Tables of every kind are :class:`darrm_opt.privacy.table.CertifiedTable`, identified by their content hash.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from darrm_opt.certify.verdict import Verdict
from darrm_opt.errors import CertificationFailed, InvalidParameter
from darrm_opt.privacy.profile import Profile
from darrm_opt.privacy.table import CertifiedTable

from .outputs import TableOutBase

Progress = Callable[..., None]


@dataclass(frozen=True)
class SolveCostKey:
    """What a solve's time and memory grow with: the ``curve`` of measured solves it follows
    (:data:`darrm_opt.mechanisms.cost.MEASURED`), its ``size`` on that curve (``feature``: the size's formula
    in the parameters, for messages), and the request's ``parameter`` (of value ``value``) the size grows
    with, named when a service refuses a solve by its predicted cost."""

    curve: str
    size: float
    feature: str = "K"
    parameter: str = "K"
    value: Any = None


@dataclass(frozen=True)
class Solved:
    """A solved table and how it was solved (``solution``: the kind's own solution object, for its views)."""

    table: CertifiedTable
    solver: str
    seconds: float
    solution: Any = field(repr=False, compare=False, default=None)


@dataclass(frozen=True)
class Example:
    """A small instance of a kind, for tests and documentation: ``params`` solve (or calibrate) in well under a
    second; ``job`` (the fields of a :class:`darrm_opt.planning.job.Job`) is a job the kind's ``plan`` serves in
    a few seconds (None for a kind that makes no offer)."""

    params: Any
    job: Mapping[str, Any] | None = None


class Mechanism(ABC):
    """One kind of release (module docstring)."""

    #: the kind's name: in documents (``kind``), database rows and the wire
    kind: ClassVar[str]
    #: the parameter type of this kind (exactly: the registry finds a kind by its parameters' type)
    params_type: ClassVar[type]
    #: the teachers' settings this kind serves; the first is the default
    settings: ClassVar[tuple[str, ...]]
    #: why it serves no other setting, stated when a user asks for one ("": only the settings are named)
    settings_reason: ClassVar[str] = ""
    #: one line for users: what the kind releases
    summary: ClassVar[str]
    #: whether its votes are class labels (else 0/1)
    labels: ClassVar[bool] = False
    #: the largest K a service solves (None: bounded by ``solve_size`` alone)
    max_K: ClassVar[int | None] = None
    #: a stored table without a profile gets one computed when read only up to this K (None: always)
    profile_on_read_max_K: ClassVar[int | None] = None
    #: whether the planner asks this kind for an offer unless kinds are named (a kind that never wins the
    #: jobs it serves and costs much to calibrate is planned only when asked for)
    planned_by_default: ClassVar[bool] = True
    #: the fields a table document of this kind must state (null counts as missing: nothing is assumed)
    document_fields: ClassVar[tuple[str, ...]] = ()
    #: fields of the DaRRM table schema this kind does not have (written as null; refused in a document),
    #: and why
    absent_fields: ClassVar[tuple[str, ...]] = ()
    absent_reason: ClassVar[str] = ""
    #: a votes file's form: "csv" (rows of K votes) or "npy" (an array (rows, K, dim) in an .npy/.npz file)
    votes_file: ClassVar[str] = "csv"
    #: a served table of this kind on the wire: a model of :mod:`darrm_opt.mechanisms.outputs` whose ``kind``
    #: is ``Literal["<this kind>"]`` (the service's table output is the union of every kind's, by ``kind``)
    output_model: ClassVar[type[TableOutBase]]
    #: the ``solve`` command's view of this kind, as "module:function" of a front-end module (called with the
    #: mechanism and the command's options); None: the generic view (the certified table, its verdict, values)
    solve_view: ClassVar[str | None] = None

    @abstractmethod
    def examples(self) -> tuple[Example, ...]:
        """Small instances of this kind (at least one), each solved in well under a second: the tests walk
        the registry and serve each through every endpoint and command that takes a table."""

    # --- parameters ---------------------------------------------------------------------------------------
    def table_size(self, params: Any) -> int:
        """How many values ``gamma`` a table of these parameters has: K + 1 for a table over the vote count
        (or the top gap); 0 for a kind whose release its parameters alone define (``gamma`` is then empty
        and absent from its documents)."""
        return int(params.K) + 1

    def check_gamma(self, params: Any, gamma: Sequence[float] | np.ndarray) -> np.ndarray:
        """``gamma`` as float64, checked: exactly ``table_size(params)`` values in [0, 1]; InvalidParameter
        naming ``gamma`` otherwise."""
        n = self.table_size(params)
        g = np.asarray(gamma, dtype=np.float64)
        if g.ndim != 1 or g.size != n or not np.all((g >= 0) & (g <= 1)):
            rule = (f"must be K + 1 = {n} values in [0, 1]" if n
                    else f"must be empty: a {self.kind} release has no table")
            raise InvalidParameter("gamma", rule, f"{g.size} values")
        return g

    @abstractmethod
    def params_from(self, data: Mapping[str, Any]) -> Any:
        """The parameters in ``data`` (a document or request: the fields of ``canonical()``), validated;
        InvalidParameter naming the field otherwise."""

    def setting(self, teachers: str | None) -> str:
        """The teachers' setting of a table of this kind (default: the first of ``settings``)."""
        if teachers is None:
            return self.settings[0]
        if teachers not in self.settings:
            why = f" ({self.settings_reason})" if self.settings_reason else ""
            raise InvalidParameter("teachers", f"a {self.kind} table is for {' or '.join(self.settings)} "
                                   f"teachers{why}", teachers)
        return teachers

    @abstractmethod
    def per_answer(self, params: Any) -> tuple[float, float]:
        """(ε₀, δ₀) of one answer."""

    def units(self, params: Any, rows: int) -> int:
        """How many times a ledger composes the kind's profile for ``rows`` answers paid together: ``rows``
        (one per answer); a kind whose profile states a whole job of several answers pays it once."""
        return rows

    #: whether a ledger runs this kind's answers as jobs whose runtime state it keeps across calls
    #: (``job_units``, ``run_job``; the state is the kind's private text, stored by the ledger durably)
    keeps_state: ClassVar[bool] = False

    def job_units(self, params: Any, state: str | None, rows: int) -> int:
        """For a kind that ``keeps_state``: how many jobs ``rows`` more answers open from ``state`` (None: no
        job yet), each paid as one unit of the kind's profile."""
        return self.units(params, rows)

    def run_job(self, params: Any, state: str | None, prepared: Any, random_bytes: Callable[[int], bytes]
                ) -> tuple[np.ndarray, str]:
        """For a kind that ``keeps_state``: the answers of the sampler's ``prepared`` rows continuing the job
        in ``state`` (opening the jobs ``job_units`` counts), and the state after them."""
        raise NotImplementedError(f"a {self.kind} release keeps no state")

    @abstractmethod
    def limit(self, params: Any) -> float:
        """What the certificate's ``limit`` must be for these parameters."""

    # --- maths --------------------------------------------------------------------------------------------
    @abstractmethod
    def certify(self, params: Any, gamma: np.ndarray, **options: Any) -> Verdict:
        """Certify ``gamma`` for ``params`` (a verdict, certified or not). ``options`` (``executor``,
        ``progress``, ``workers``) go to kinds whose certification is a sweep; others ignore them."""

    @abstractmethod
    def profile(self, params: Any, gamma: np.ndarray) -> Profile:
        """The certified privacy profile of ``gamma`` (an upper bound of δ(ε′) for every ε′ ≥ 0)."""

    def certify_with_profile(self, params: Any, gamma: np.ndarray, progress: Progress | None = None
                             ) -> tuple[Verdict, Profile | None]:
        """The certificate and, when it certifies, the profile (a kind may compute both in one pass)."""
        cert = self.certify(params, gamma)
        return cert, (self.profile(params, gamma) if cert.certified else None)

    @abstractmethod
    def solve(self, params: Any, *, solver: str, teachers: str | None = None,
              progress: Progress | None = None) -> Solved:
        """The optimal certified table for ``params`` (CertificationFailed rather than an uncertified one)."""

    def solved(self, params: Any, solution: Any, teachers: str | None,
               profile: Profile | None = None) -> Solved:
        """The :class:`Solved` of a kind's certified solution (``gamma``, ``certificate``, ``solver``,
        ``seconds``), with its profile (computed here when not given)."""
        gamma = np.asarray(solution.gamma, dtype=np.float64)
        prof = self.profile(params, gamma) if profile is None else profile
        return Solved(self.table(params, gamma, solution.certificate, teachers, prof), solution.solver,
                      solution.seconds, solution)

    @abstractmethod
    def expected_error(self, params: Any, gamma: np.ndarray) -> float:
        """Pr[answer ≠ the votes' majority (plurality)] under the parameters' prior (the LP's objective)."""

    @abstractmethod
    def certificate_from(self, data: Mapping[str, Any]) -> Verdict:
        """The certificate in a document (as ``Verdict.to_dict`` wrote it)."""

    @abstractmethod
    def check_profile(self, params: Any, gamma: np.ndarray, stored: Profile, certificate: Verdict,
                      **options: Any) -> Any:
        """The verdict on a stored privacy profile (:class:`darrm_opt.privacy.statements.ProfileCheck`): each of
        its statements proven against the true profile, without tolerance."""

    @abstractmethod
    def verdict_line(self, params: Any, certificate: Verdict) -> str:
        """The certificate in one line (and more lines where a kind explains its worst case)."""

    def failure(self, params: Any, gamma: np.ndarray, certificate: Verdict) -> str:
        """Why a table is refused (rich markup), for stderr."""
        return f"[bold red]violation:[/] {certificate.reason}"

    @abstractmethod
    def describe(self, params: Any) -> str:
        """The table in words, with its parameters (for views)."""

    def setting_note(self, params: Any, teachers: str) -> dict[str, Any]:
        """What the teachers' setting implies for a table's answers (``model.neighbours.setting_note``)."""
        from darrm_opt.model.neighbours import setting_note

        return setting_note(teachers).to_dict()

    def baselines(self, params: Any) -> dict[str, np.ndarray | None]:
        """Closed-form tables to show beside an optimal one (None: undefined for these parameters)."""
        return {}

    def plan(self, job: Any, progress: Any = None) -> Any:
        """This kind's most accurate certified table for a job (:class:`darrm_opt.planning.job.Job`: Q answers
        under a total budget), as a :class:`darrm_opt.planning.job.Offer` whose ``epsilon_spent`` is the
        ledger's exact composition of Q answers; None when the kind does not serve the job's setting, votes
        or K. ``planning.job.BudgetInfeasible``-like errors are raised as InvalidParameter naming the budget.
        ``progress(stage, **info)``, when given, hears of the search's steps."""
        return None

    def plan_data_dependent(self, job: Any) -> Any:
        """This kind's offer for a job under data-dependent accounting (PATE App. B): an
        :class:`darrm_opt.planning.job.Offer` with ``accounting`` = ``data-dependent``, whose
        ``epsilon_spent`` is the expected sanitised ε + 2 SD on public histograms of the job's prior, run on a
        data-dependent ledger with the offer's ``policy``; None where the kind has no such accounting."""
        return None

    #: whether a table of this kind may answer from a random subset of its teachers (a ``subsample`` m of K,
    #: :mod:`darrm_opt.privacy.subsample`): only where one record changes one teacher's vote (disjoint shards)
    subsampling: ClassVar[bool] = False

    def refuse_subsample(self, data: Mapping[str, Any]) -> None:
        """InvalidParameter naming ``subsample`` when ``data`` sets one and this kind cannot sample teachers."""
        if data.get("subsample") is None or self.subsampling:
            return
        if "shared" in self.settings:
            rule = ("cannot apply to teachers on shared data: one record changes every teacher's vote, so "
                    "sampling teachers amplifies nothing (only disjoint shards, the PATE setting)")
        else:
            rule = f"is not offered for {self.kind} tables"
        raise InvalidParameter("subsample", rule, data.get("subsample"))

    #: whether its offers are calibrated per answer (ε₀, δ₀): their spend is then the ledger's tightest bound
    #: (the exact composition of the profile, or a generic composition of the (ε₀, δ₀) where smaller), and their
    #: details state ε₀, δ₀ and the composition that gave the spend
    per_answer_offers: ClassVar[bool] = False
    #: the details its offers record about their search rather than their table (``verify`` checks their type
    #: only: :data:`darrm_opt.release.document_check.RECORDED`)
    search_details: ClassVar[tuple[str, ...]] = ()

    def offer_spend(self, table: CertifiedTable, queries: int, budget_delta: float) -> Any:
        """The ε that ``queries`` answers of ``table`` spend at ``budget_delta`` as this kind's data-independent
        offers state it (:class:`darrm_opt.privacy.accounting.Spend`: ε, δ, method): the exact composition of
        the table's privacy profile, or for ``per_answer_offers`` the ledger's tightest bound. ``verify``
        recomputes a planned table's ``epsilon_spent`` with it."""
        from darrm_opt.privacy import accounting

        profiles = [(table.profile, queries)]
        if not self.per_answer_offers:
            return accounting.exact(profiles, budget_delta)
        eps0, delta0 = self.per_answer(table.params)
        return accounting.account([(eps0, delta0, queries)], budget_delta, profiles=profiles).spend

    def offer_details(self, table: CertifiedTable, composition: str) -> dict[str, Any]:
        """The figures a data-independent offer of ``table`` shows beside it (``Offer.details``) that the
        table and the method of its spend (``composition``) determine: what the planners write and what
        ``verify`` recomputes. The figures about the search itself (``search_details``) its planner adds."""
        if not self.per_answer_offers:
            return {}
        eps0, delta0 = self.per_answer(table.params)
        return {"epsilon0": eps0, "delta0": delta0, "composition": composition}

    def solve_size(self, params: Any) -> int:
        """How many privacy constraints a solve must check (the service's limits compare it)."""
        return 4 * params.K

    def solve_cost_key(self, params: Any) -> SolveCostKey | None:
        """What drives the time and memory of ``solve`` for these parameters (:mod:`darrm_opt.mechanisms.cost`
        predicts them from measured solves on the key's curve): by default the kind's own curve, by K. None
        for a kind whose solve is no LP (the release its parameters define, certified in closed form)."""
        return SolveCostKey(self.kind, float(params.K), value=params.K)

    # --- release ------------------------------------------------------------------------------------------
    @abstractmethod
    def sampler(self, table: CertifiedTable, random_bytes: Callable[[int], bytes]) -> Any:
        """The table's sampler: ``prepare(votes)`` (checked, no coin), ``rows(prepared)``, ``draw(prepared)``."""

    # --- tables -------------------------------------------------------------------------------------------
    def table(self, params: Any, gamma: Sequence[float] | np.ndarray, certificate: Verdict | Mapping[str, Any],
              teachers: str | None = None, profile: Profile | None = None) -> CertifiedTable:
        """The certified table of ``gamma`` with a certificate computed for it (a document's certificate is
        read back); InvalidParameter when the certificate does not certify exactly these parameters."""
        cert = self.certificate_from(certificate) if isinstance(certificate, Mapping) else certificate
        if cert.certified is not True or cert.limit != self.limit(params):
            raise InvalidParameter("certificate", f"does not certify this {self.kind} table's parameters")
        g = self.check_gamma(params, gamma)
        eps0, delta0 = self.per_answer(params)
        return CertifiedTable(self.kind, params, tuple(g.tolist()), cert, self.setting(teachers), profile, eps0,
                              delta0, self.expected_error(params, g))

    def certify_table(self, params: Any, gamma: Sequence[float] | np.ndarray, *, teachers: str | None = None,
                      profile: bool = True, name: str = "the table", progress: Progress | None = None
                      ) -> CertifiedTable:
        """Certify ``gamma`` for ``params`` (CertificationFailed when it is not private) and, when ``profile``,
        compute its certified privacy profile."""
        teachers = self.setting(teachers)
        g = self.check_gamma(params, gamma)
        if profile:
            cert, prof = self.certify_with_profile(params, g, progress)
        else:
            cert, prof = self.certify(params, g), None
        if not cert.certified:
            raise CertificationFailed(f"{name} is not {self.private_as(params)}: {cert.reason}", cert)
        return self.table(params, g, cert, teachers, prof)

    def private_as(self, params: Any) -> str:
        """What its certificate proves, in words (for messages)."""
        return "(ε, δ)-DP per answer"


def certificate_of_fields(cls: Any, data: Mapping[str, Any], what: str) -> Any:
    """A certificate dataclass ``cls`` from the fields of a document that it has; InvalidParameter naming
    ``certificate`` (``is not {what}``) when they do not make one."""
    try:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
    except TypeError:
        raise InvalidParameter("certificate", f"is not {what}") from None


def exact_pair_check(true: Any, stored: Any, what: str) -> Any:
    """The verdict on a stored profile of a kind whose profile is one exact pair: valid iff it is ``true``."""
    from darrm_opt.privacy.statements import ProfileCheck

    if stored == true:
        return ProfileCheck("valid", 1)
    return ProfileCheck("optimistic", 1, what, f"stored {stored.to_dict()} is not {true.to_dict()}")
