"""The service's database schema (SQLAlchemy 2 ORM). Migrations in ``darrm_opt/ledger/migrations`` create it.

- ``gamma_tables``: certified γ tables by id = their content hash (kind, setting, parameters, γ:
  :func:`darrm_opt.privacy.table.table_id`), with γ, certificate and privacy profile as exact JSON text;
  ``params_key`` finds the service's own solve of a parameter set;
- ``solve_jobs``: one row per table id being (or last) solved, shared by every server process;
- ``ledgers``: budgets and the current spend (answers, ε, δ, the composition method used), and the tenant
  that owns the ledger (only that tenant's keys spend from it or read it; 0008);
- ``ledger_usage``: answers per (ledger, table), with the table's per-answer cost (ε₀, δ₀);
- ``spends``: one row per paid request, committed with the debit; the answers are kept only when the
  request carried an ``idempotency_key``, with a digest of the request, and the debit's own ``debit_id``.
  Votes are never stored.
- ``api_keys``: the service's bearer keys by SHA-256 digest (never the key itself), each with its tenant
  and scope (``tenant`` or ``admin``), and when it was revoked (0008; :mod:`darrm_opt.ledger.keys`);
- ``compositions``: exact compositions' ε by key, computed by one server process and read by the others
  (0010; :mod:`darrm_opt.ledger.compositions`);
- ``label_jobs``: the service's labelling jobs (``/v1/jobs``, 0012; :mod:`darrm_opt.ledger.jobs`): each a
  tenant's named job, its plan inputs, the ledger that pays it and, once planned, its table.
- ``record_answers``: the answer a ledger released for a client's record id (0014): a record asked again
  gets that answer at no cost; written in the debit's own transaction (:mod:`darrm_opt.ledger.core`).
- ``plans``: budget plans by id (a hash of their inputs): the request, status, progress, result or error,
  under a heartbeated lease (0013; ``api/plan_store.py``, :mod:`darrm_opt.ledger.leases`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: BIGINT everywhere except SQLite, whose autoincrement needs INTEGER PRIMARY KEY
BigIntId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(ts: datetime) -> datetime:
    """A stored time as UTC-aware (SQLite returns times without their zone)."""
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


#: the tenant of ledgers made before tenancy, and of bearer keys given without one
DEFAULT_TENANT = "default"


class Base(DeclarativeBase):
    pass


class GammaTable(Base):
    __tablename__ = "gamma_tables"

    #: the content hash of the table (darrm_opt.privacy.table.table_id: kind, setting, parameters and γ)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: the service's solve of these parameters in this setting (darrm_opt.privacy.table.params_key); NULL for
    #: tables registered from files, which never answer a solve request
    params_key: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True, index=True)
    #: the mechanism (darrm_opt.mechanisms) and its parameters as the kind's canonical JSON: what a table is
    kind: Mapped[str] = mapped_column(String(40))
    params: Mapped[str] = mapped_column(Text)
    #: columns that predate ``kind``/``params`` (darrm_opt.ledger.tables): list filters, never read back
    K: Mapped[int] = mapped_column(Integer)
    m: Mapped[float] = mapped_column(Double)  #: 1 for disjoint-nonprivate (no m; m·ε is its per-answer ε; 0006)
    epsilon: Mapped[float] = mapped_column(Double)  #: the teachers' ε; the per-answer ε for disjoint-nonprivate
    teacher_delta: Mapped[float] = mapped_column(Double)  #: 0 for disjoint-nonprivate (no teacher Δ; 0006)
    delta: Mapped[float] = mapped_column(Double)
    prior: Mapped[str] = mapped_column(Text)  #: any length: a counts prior has up to K + 1 items (0015)
    #: shared | disjoint-private | disjoint-nonprivate (darrm_opt.model.neighbours); part of the table id
    teachers: Mapped[str] = mapped_column(String(32), default="shared", server_default="shared")
    solver: Mapped[str] = mapped_column(String(20))
    gamma: Mapped[str] = mapped_column(Text)
    certificate: Mapped[str] = mapped_column(Text)
    privacy_profile: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: C for a multi-class table (class-label votes; ``epsilon`` is then its per-answer ε, m = 1); NULL: binary
    classes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    expected_error: Mapped[float] = mapped_column(Double)
    solve_seconds: Mapped[float] = mapped_column(Double)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SolveJob(Base):
    __tablename__ = "solve_jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    params: Mapped[str] = mapped_column(Text)
    solver: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(16))
    stage: Mapped[str] = mapped_column(String(32), default="queued")
    progress: Mapped[str] = mapped_column(Text, default="{}")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    owner: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PlanRecord(Base):
    __tablename__ = "plans"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: what rebuilds the plan's work in any process (JSON)
    request: Mapped[str] = mapped_column(Text)
    #: queued | running | done | failed
    status: Mapped[str] = mapped_column(String(16))
    progress: Mapped[str] = mapped_column(Text, default="{}")
    #: the plan's document once done (JSON); its error once failed
    result: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    table_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: the last ledger opened with this plan (``create_ledger``) and its tenant
    ledger_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    ledger_tenant: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: the process running it; ``updated_at`` is its lease, renewed while it runs
    owner: Mapped[str] = mapped_column(String(64))
    #: runs started: the first claim, a retry after a failure, a takeover
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LedgerRecord(Base):
    __tablename__ = "ledgers"
    #: a tenant's ledgers, oldest first (GET /v1/ledgers)
    __table_args__ = (Index("ix_ledgers_tenant_created", "tenant", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    epsilon_budget: Mapped[float] = mapped_column(Double)
    delta_budget: Mapped[float] = mapped_column(Double)
    answers: Mapped[int] = mapped_column(BigInteger, default=0)
    epsilon_spent: Mapped[float] = mapped_column(Double, default=0.0)
    delta_spent: Mapped[float] = mapped_column(Double, default=0.0)
    composition: Mapped[str] = mapped_column(String(32), default="basic")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: disjoint-shard private teachers' (ε, Δ): caps the total (darrm_opt.privacy.parallel); None if shared
    cap_epsilon: Mapped[float | None] = mapped_column(Double, nullable=True)
    cap_delta: Mapped[float | None] = mapped_column(Double, nullable=True)
    #: the tenant that owns the ledger (darrm_opt.ledger.keys); ledgers made before tenancy: 'default' (0008)
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT, server_default=DEFAULT_TENANT)


class LedgerUsage(Base):
    __tablename__ = "ledger_usage"

    ledger_id: Mapped[str] = mapped_column(ForeignKey("ledgers.id"), primary_key=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("gamma_tables.id"), primary_key=True)
    epsilon0: Mapped[float] = mapped_column(Double)
    delta0: Mapped[float] = mapped_column(Double)
    answers: Mapped[int] = mapped_column(BigInteger, default=0)


class SpendRecord(Base):
    __tablename__ = "spends"
    __table_args__ = (UniqueConstraint("ledger_id", "idempotency_key", name="uq_spends_ledger_key"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    ledger_id: Mapped[str] = mapped_column(ForeignKey("ledgers.id"), index=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("gamma_tables.id"))
    rows: Mapped[int] = mapped_column(Integer)
    epsilon_spent: Mapped[float] = mapped_column(Double)
    delta_spent: Mapped[float] = mapped_column(Double)
    composition: Mapped[str] = mapped_column(String(32))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    answers: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: SHA-256 of (table, ledger, votes) of the request that first used idempotency_key
    #: (darrm_opt.ledger.core.request_digest)
    request_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: the debit's own id: a retried transaction whose commit went through is recognised (0007); NULL before
    debit_id: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DataDependentLedgerRecord(Base):
    """A data-dependent ledger (darrm_opt.ledger.dd_account, migration 0009): one job of GNMax or
    Confident-GNMax answers whose data-dependent account is published only as a sanitised ε.

    ``state`` holds the private account (the data-dependent RDP sum and sensitivity vector: functions of the
    votes, never served); ``published_epsilon`` is the one GNSS release, NULL until the ledger is sealed."""

    __tablename__ = "data_dependent_ledgers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    policy: Mapped[str] = mapped_column(Text)
    queries: Mapped[int] = mapped_column(BigInteger, default=0)
    answered: Mapped[int] = mapped_column(BigInteger, default=0)
    state: Mapped[str] = mapped_column(Text)
    published_epsilon: Mapped[float | None] = mapped_column(Double, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: the tenant whose ledger it is (another tenant reads it as absent)
    tenant: Mapped[str] = mapped_column(String(64), default=DEFAULT_TENANT, server_default=DEFAULT_TENANT)


class ApiKey(Base):
    __tablename__ = "api_keys"

    #: a short public handle of the key (list and revoke by it; never enough to use the key)
    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    #: SHA-256 (hex) of the key's text; the key itself is shown once, when made, and never stored
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)  # ix_api_keys_tenant
    scope: Mapped[str] = mapped_column(String(16))  #: tenant | admin
    name: Mapped[str] = mapped_column(String(200), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Composition(Base):
    """An exact composition's ε shared by every server process: one process computes it, the others read it
    (0010; :class:`darrm_opt.ledger.compositions.SharedCompositions`)."""

    __tablename__ = "compositions"

    #: :func:`darrm_opt.privacy.pld.composition_key` of the composition (parts, δ, grid, accounting version)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: its ε (an upper bound); NULL while a process has claimed it and is computing it
    epsilon: Mapped[float | None] = mapped_column(Double, nullable=True)
    #: when the row was claimed or its value stored (a claim older than the stale time may be taken over)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class JobState(Base):
    """The private runtime state of a ledger's current job of one table (0011;
    :class:`darrm_opt.ledger.job_state.JobStates`): the kind's state as text and a version bumped by every
    update (compare and swap). Never served."""

    __tablename__ = "job_states"

    ledger_id: Mapped[str] = mapped_column(ForeignKey("ledgers.id"), primary_key=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("gamma_tables.id"), primary_key=True)
    state: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LabelJobRecord(Base):
    """A labelling job of the service (0012; :class:`darrm_opt.ledger.jobs.LabelJobStore`): its plan inputs,
    the ledger that pays its answers (whose ``record_answers`` hold each record's label) and its table
    once planned; a tenant's job names are unique (a second POST with the name resumes the job)."""

    __tablename__ = "label_jobs"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_label_jobs_tenant_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    #: the plan inputs as canonical JSON (K, classes, queries, budget, teachers, prior, solver, kinds)
    request: Mapped[str] = mapped_column(Text)
    ledger_id: Mapped[str] = mapped_column(ForeignKey("ledgers.id"))
    #: the planned table; NULL while planning (a restart plans it again from ``request``)
    table_id: Mapped[str | None] = mapped_column(ForeignKey("gamma_tables.id"), nullable=True)
    #: why planning failed (the job then answers no votes); NULL otherwise
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RecordAnswer(Base):
    """The answer a ledger released for a record id its client gave (0014): written in the transaction of the
    debit that paid it (:func:`darrm_opt.ledger.core.decide`), so a paid answer is never unrecorded nor a
    recorded one unpaid; a row asking about the record again gets this answer and pays nothing. Scoped by the
    ledger, hence by its tenant. ``votes_digest``: SHA-256 of the row's votes (one-way), to report a record
    asked again with other votes."""

    __tablename__ = "record_answers"

    ledger_id: Mapped[str] = mapped_column(ForeignKey("ledgers.id"), primary_key=True)
    record_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    table_id: Mapped[str] = mapped_column(ForeignKey("gamma_tables.id"))
    #: the released answer (:func:`darrm_opt.ledger.core.encode_answers` of a one-answer array)
    answer: Mapped[str] = mapped_column(Text)
    votes_digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
