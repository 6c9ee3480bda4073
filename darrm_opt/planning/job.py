"""A labelling job and a mechanism's offer for it: what the job planner compares.

A *job* is Q answers of one kind of query (K teachers, 0/1 votes or C classes, a teachers' setting, a
prior over the votes) under one total budget (ε_B, δ_B). Each mechanism (:mod:`darrm_opt.mechanisms`)
answers a job with its most accurate :class:`Offer` (``Mechanism.plan``): a certified table calibrated so
that the exact composition of Q of its answers (:func:`darrm_opt.privacy.pld.exact_epsilon`) fits the
budget, its expected error per answer under the job's prior, and the ε it spends. The planner
(:func:`darrm_opt.mechanisms.plan_job`) takes the most accurate offer that the job's ``accounting`` allows:
by default (``worst-case``) only an offer whose Q answers fit the budget in the worst case over every dataset
(a plain ledger at the budget pays them all); with ``data-dependent`` also an offer whose ε is a sanitised
data-dependent target (PATE App. B), which is shown beside the worst-case choice otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.gnmax import LABELS
from darrm_opt.model.params import finite_number

TEACHERS = ("shared", "disjoint-private", "disjoint-nonprivate")
#: what a plan may choose: ``worst-case`` (the default) only offers whose Q answers fit the budget over every
#: dataset; ``data-dependent`` also offers whose spend is a sanitised data-dependent ε (a target, not a cap)
PLAN_ACCOUNTINGS = ("worst-case", "data-dependent")
DEFAULT_PLAN_ACCOUNTING = "worst-case"


def check_plan_accounting(value: object) -> str:
    """``value`` if it is one of PLAN_ACCOUNTINGS; InvalidParameter naming ``accounting`` otherwise."""
    if not isinstance(value, str) or value not in PLAN_ACCOUNTINGS:
        raise InvalidParameter("accounting", "must be worst-case (the default: the budget holds over every "
                               "dataset) or data-dependent (a sanitised data-dependent ε may be chosen)", value)
    return value


@dataclass(frozen=True)
class Job:
    """Q answers of K teachers' votes (0/1, or ``classes`` = C labels) under a total (ε_B, δ_B).

    ``teachers``: the setting (``disjoint-nonprivate`` is PATE's). ``prior``: the prior over the votes, by
    name (a kind reads it with its own prior type). ``epsilon`` and ``teacher_delta``: the teachers' own
    (ε, Δ) where they are DP-trained (shared and disjoint-private settings), else None. ``accounting``
    (PLAN_ACCOUNTINGS): what the planner may choose, ``worst-case`` by default (a data-dependent offer is then
    listed beside the choice, never chosen)."""

    K: int
    queries: int
    budget_epsilon: float
    budget_delta: float
    teachers: str = "disjoint-nonprivate"
    classes: int | None = None
    prior: str = "paper"
    epsilon: float | None = None
    teacher_delta: float | None = None
    solver: str = "highs"
    accounting: str = DEFAULT_PLAN_ACCOUNTING
    #: m: only offers whose answers each read a uniform random m of the K teachers (kinds with
    #: ``subsampling``; PATE setting only); None: every kind, those with ``subsampling`` searching m themselves
    subsample: int | None = None
    #: search every variant of the kinds asked, those that rarely win and cost much to calibrate included (the
    #: stability kind's GNMax fallback); ``plan_job`` sets it when the kinds are named
    thorough: bool = False

    def __post_init__(self) -> None:
        check_plan_accounting(self.accounting)
        if self.teachers not in TEACHERS:
            raise InvalidParameter("teachers", f"must be one of {', '.join(TEACHERS)}", self.teachers)
        if isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 1:
            raise InvalidParameter("K", "must be an integer >= 1", self.K)
        if self.subsample is not None:
            from darrm_opt.model.params import integer_in

            if self.teachers != "disjoint-nonprivate":
                raise InvalidParameter("subsample", "applies only to teachers on disjoint shards "
                                       "(disjoint-nonprivate): where one record reaches every teacher (shared data) "
                                       "or every teacher is private, sampling teachers amplifies nothing",
                                       self.subsample)
            object.__setattr__(self, "subsample", integer_in("subsample", self.subsample, 1, self.K))
        eps = finite_number("budget_epsilon", self.budget_epsilon)
        if eps <= 0:
            raise InvalidParameter("budget_epsilon", "must be > 0", self.budget_epsilon)
        delta = finite_number("budget_delta", self.budget_delta)
        if not 0 <= delta < 1:
            raise InvalidParameter("budget_delta", "must satisfy 0 <= budget_delta < 1", self.budget_delta)
        object.__setattr__(self, "budget_epsilon", eps)
        object.__setattr__(self, "budget_delta", delta)
        q = self.queries
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise InvalidParameter("queries", "must be an integer >= 1", q)
        if self.classes is not None:
            c = self.classes
            if isinstance(c, bool) or not isinstance(c, int) or c < 2:
                raise InvalidParameter("classes", "must be an integer >= 2", c)
        object.__setattr__(self, "prior", normal_prior(self.prior, self.classes))
        if self.prior.startswith("counts:"):  # its L must be counts of K votes
            from darrm_opt.model.params import Prior

            object.__setattr__(self, "prior", Prior.parse(self.prior).check_K(self.K).spec)
        if self.epsilon is not None:
            e = finite_number("epsilon", self.epsilon)
            if e <= 0:
                raise InvalidParameter("epsilon", "must be > 0", self.epsilon)
            object.__setattr__(self, "epsilon", e)

    def canonical(self) -> dict[str, Any]:
        """Every field; ``subsample`` and ``thorough`` only where set (a job without them keeps its form)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__
                if (k != "subsample" or self.subsample is not None) and (k != "thorough" or self.thorough)}


def normal_prior(prior: object, classes: int | None) -> str:
    """The one spelling of a job's prior, so that every kind reads the same prior whatever its spelling:
    for class-label votes (``classes`` set) a class-label prior written without the ``labels:`` prefix (the
    votes are class labels whatever the prefix says), and for C = 2 ``beta:A,B`` (one p ~ Beta(A, B) shared
    by the teachers, each voting the true class with probability p) as ``dirichlet:A,B``, the same law of
    the histogram (π = (p, 1 − p) ~ Dirichlet(A, B); its counts are Beta-binomial). 0/1-vote priors
    (``classes`` None) are kept as written. InvalidParameter naming ``prior`` when it is not a string."""
    if not isinstance(prior, str):
        raise InvalidParameter("prior", "must be a string such as 'paper' or 'beta:9,1'", prior)
    text = prior.strip()
    if classes is None:
        return text
    if text.startswith(LABELS):
        text = text[len(LABELS):].strip()
    kind, sep, rest = text.partition(":")
    if classes == 2 and kind == "beta" and sep:
        return f"dirichlet:{rest}"
    return text


#: the two accountings an offer can be run under
ACCOUNTINGS = ("data-independent", "data-dependent")

GUARANTEES = {
    "data-independent": ("(ε, δ)-DP in the worst case over every dataset: the plain ledger composes the Q answers "
                         "of this table exactly and refuses an answer that would exceed the budget"),
    "data-dependent": ("a sanitised data-dependent ε (PATE App. B): a noisy, differentially private estimate of "
                       "the (ε, δ) bound that holds for this job's dataset, published once by a data-dependent "
                       "ledger; epsilon_spent is its expected value plus two standard deviations on the job's "
                       "prior, a planning target and not a cap (the worst case is data_independent_epsilon)"),
}


@dataclass(frozen=True)
class Offer:
    """A mechanism's most accurate release for a job, the one result of planning
    (:func:`darrm_opt.mechanisms.plan_job`): ``table`` (a :class:`darrm_opt.privacy.table.CertifiedTable`;
    None for disjoint-private teachers whose own (ε, Δ) is within the budget: the plain majority γ ≡ 1 is
    then free by parallel composition), its expected error per answer under the job's prior,
    ``epsilon_spent`` and how it was calibrated (``details``: the kind's own figures, e.g. σ or the per-answer
    (ε₀, δ₀); ``seconds``). A kind whose search records more gives ``plan``, the ``plan`` member of its table
    document (Q, the budget, the spend, every candidate tried), and ``solution``, its solver's record of the
    chosen table (solver, mode, iterations).

    ``accounting`` says what ``epsilon_spent`` is and how the job runs:

    * ``data-independent``: the ε of Q answers at δ_B by the ledger's exact composition (≤ ε_B, a cap the
      plain ledger enforces); run with the table on a plain ledger;
    * ``data-dependent``: the expected sanitised ε + 2 SD of a data-dependent ledger running the table's
      mechanism (≤ ε_B, a planning target on the job's prior); ``run`` holds that ledger's policy."""

    mechanism: str
    table: Any
    expected_error: float
    epsilon_spent: float
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    accounting: str = "data-independent"
    #: for a data-dependent offer, the data-dependent ledger's policy (darrm_opt.ledger.data_dependent)
    policy: dict[str, Any] | None = None
    plan: dict[str, Any] = field(default_factory=dict, repr=False)
    solution: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.accounting not in ACCOUNTINGS:
            raise InvalidParameter("accounting", f"must be one of {', '.join(ACCOUNTINGS)}", self.accounting)
        if (self.policy is None) != (self.accounting == "data-independent"):
            raise InvalidParameter("policy", "a data-dependent offer needs its ledger's policy, and only it",
                                   self.policy)

    @property
    def guarantee(self) -> str:
        return GUARANTEES[self.accounting]

    @property
    def majority_free(self) -> bool:
        """Whether the offer is the plain majority, free by parallel composition (no table)."""
        return self.table is None

    @property
    def worst_case(self) -> bool:
        """Whether ``epsilon_spent`` holds over every dataset (a cap the plain ledger enforces)."""
        return self.policy is None

    @property
    def worst_case_epsilon(self) -> float | None:
        """ε of the Q answers at δ_B over every dataset: ``epsilon_spent`` for a data-independent offer, the
        plain ledger's exact composition of its table's Q answers for a data-dependent one (None if unknown)."""
        if self.policy is None:
            return self.epsilon_spent
        value = self.details.get("data_independent_epsilon")
        return None if value is None else float(value)

    @property
    def label(self) -> str:
        """The mechanism, with the accounting when it is not the worst case."""
        return self.mechanism if self.policy is None else f"{self.mechanism} ({self.accounting})"

    def run(self) -> dict[str, Any]:
        """How to run the job: the ledger to open and what it takes."""
        if self.table is None:
            return {"ledger": "plain", "table_id": None,
                    "how": "answer with the plain majority (γ ≡ 1) on a ledger capped by the teachers' (ε, Δ): "
                           "parallel composition bounds every answer"}
        if self.policy is None:
            return {"ledger": "plain", "table_id": self.table.id,
                    "how": "answer with this table (/v1/aggregate or darrm-opt aggregate) on a plain ledger, "
                           "which composes the answers exactly"}
        return {"ledger": "data-dependent", "policy": self.policy,
                "how": "open a data-dependent ledger with this policy (POST /v1/data-dependent-ledgers, or "
                       "darrm_opt.DataDependentLedger), answer or record the job's queries on it and "
                       "publish its sanitised ε once at the end; not a plain ledger"}

    def spend_text(self, budget_delta: float) -> str:
        """One line on what ``epsilon_spent`` is."""
        if self.policy is None:
            return (f"spends ε={self.epsilon_spent:.6g} at δ={budget_delta:g} (exact composition of its profile, "
                    "worst case)")
        return (f"expected sanitised ε + 2 SD = {self.epsilon_spent:.6g} at δ={budget_delta:g} (data-dependent, "
                "a planning target on the job's prior, not a cap)")

    def served(self, ledger_epsilon: float, job: Job) -> dict[str, Any]:
        """The offer's spend once its table is served, given ``ledger_epsilon``, the plain ledger's exact
        composition of Q of the served table's answers at δ_B: for a data-independent offer that is its spend
        and must fit the budget (InvalidParameter naming budget_epsilon otherwise); for a data-dependent one
        it is the worst case, shown beside the planning target."""
        if self.policy is None:
            if ledger_epsilon > job.budget_epsilon:
                raise InvalidParameter("budget_epsilon", f"the planned table {self.table.id} spends "
                                       f"{ledger_epsilon:.6g} > budget {job.budget_epsilon:g}", job.budget_epsilon)
            return {"epsilon_spent": ledger_epsilon, "data_independent_epsilon": ledger_epsilon}
        return {"epsilon_spent": self.epsilon_spent, "data_independent_epsilon": ledger_epsilon}

    def summary(self) -> dict[str, Any]:
        """What every front end shows about the offer (JSON)."""
        return {"mechanism": self.mechanism, "accounting": self.accounting, "guarantee": self.guarantee,
                "expected_error": self.expected_error, "epsilon_spent": self.epsilon_spent, "run": self.run()}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "table_id": None if self.table is None else self.table.id, **self.details,
                "seconds": self.seconds}
