"""Service settings from the environment (prefix ``DARRM_``) through pydantic-settings.

``DARRM_DATABASE_URL``   ``sqlite:///darrm.db`` (default: a SQLite file in the working directory, WAL mode)
                         or ``postgresql://user@host/db`` (rewritten to the psycopg 3 driver)
``DARRM_API_KEYS``       comma-separated bearer keys, each ``KEY`` (tenant ``default``) or ``TENANT:KEY``; keys
                         made with ``darrm-opt keys add`` live in the database instead (docs/tenancy.md);
                         with no key anywhere every keyed endpoint answers 401
``DARRM_ADMIN_KEYS``     the same for operators' keys (admin scope: read every tenant's ledgers)
``DARRM_KEY_REFRESH_S``  how often the database's keys are reread (2 s): a key added or revoked with
                         ``darrm-opt keys`` is honoured by running servers within this time
``DARRM_SQLITE_SYNCHRONOUS``  FULL (default: a debit survives power loss) or EXTRA; NORMAL survives a
                         process crash only
``DARRM_INLINE_MAX_MULTISETS``, ``DARRM_INLINE_TIMEOUT_S``: a table whose LP has at most this many corner
                         multisets is solved inline (200) if it finishes within the timeout, else 202 + job
``DARRM_MAX_SOLVE_SECONDS``, ``DARRM_MAX_SOLVE_MEMORY_MB``  a table whose solve is predicted
                         (``darrm_opt.mechanisms.cost``, from measured solves of every LP kind) to take longer
                         (300 s) or more memory (2048 MB) is refused (422 naming the parameter its cost grows
                         with, K, and the predicted cost)
``DARRM_MAX_MULTISETS``  an operator's cap on a solve's corner multisets (422 naming K); unset: none for the
                         kinds the cost model covers, 200 000 000 for an LP it has no measured solves of
``DARRM_SMALL_SOLVE_WORKERS``  threads solving the inline-sized problems (2), apart from the large ones
                         (``DARRM_SOLVE_WORKERS``, 1), so a small table never waits behind a large solve
``DARRM_SOLVE_QUOTA``    background solves one tenant may have running or queued per process (2); one more
                         is answered 429 with Retry-After
``DARRM_METRICS_AUTH``  ``admin`` (default: ``GET /metrics`` needs an admin key, 401 without a key, 403 with a
                         tenant's) or ``open`` (no key)
``DARRM_JOB_STALE_S``    a solve job's claim not renewed for this long (3 s; renewed every 0.5 s while its
                         process solves) is taken over by the next request for it
``DARRM_MAX_ROWS``       vote rows per aggregate request
``DARRM_MAX_BODY_BYTES`` body limit of ``POST /v1/aggregate`` (16 MiB: 100 000 rows of K = 41 votes
                         take 8.4 MB); larger bodies get 413 before they are read
``DARRM_MAX_REQUEST_BYTES``  body limit of every other endpoint (64 KiB)
``DARRM_MAX_BODY_MEMORY``  bytes of ``POST /v1/aggregate`` bodies one process holds at once (256 MiB): a
                         body arriving past it is answered 503 (Retry-After); bodies are read as they
                         arrive, so a connection holds what it sent, whatever its Content-Length says
``DARRM_ACCESS_LOG``    one JSON line per request on stderr (true; ``api.observability``)
``DARRM_BODY_TIMEOUT_S``, ``DARRM_HEADER_TIMEOUT_S``  a request's body must arrive whole within 60 s of its
                         headers (else 408, connection closed), its headers within 10 s (else the connection
                         is closed; ``api.protocol``, used by ``darrm-opt serve``)
``DARRM_EXACT_WORKERS``  threads computing exact compositions for the debit writer (2), off its thread
``DARRM_TENANT_RATE``, ``DARRM_TENANT_BURST``  requests per second (and the burst) one tenant may make to
                         ``/v1`` in each server process (unset: unlimited); one more is answered 429 with
                         Retry-After before its body is read (``api.admission``)
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from darrm_opt.ledger.leases import HEARTBEAT_S, STALE_S

#: the multiset limit of an LP the solve cost model has no measured solves of (K <= 45 with Δ > 0)
DEFAULT_MAX_MULTISETS = 200_000_000


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DARRM_", extra="ignore")

    database_url: str = "sqlite:///darrm.db"
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    admin_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    key_refresh_s: float = Field(2.0, gt=0)
    sqlite_synchronous: Literal["FULL", "EXTRA", "NORMAL"] = "FULL"
    # tables
    default_solver: str = "highs"
    inline_max_multisets: int = Field(4_000_000, ge=0)  # K <= 25 with Δ > 0; K <= 101 pure
    inline_timeout_s: float = Field(20.0, gt=0)
    #: an operator's cap on a solve's corner multisets; unset: the kinds of the cost model
    #: (darrm_opt.mechanisms.cost) are limited by their predicted time and memory only, the others by
    #: DEFAULT_MAX_MULTISETS
    max_multisets: int | None = Field(None, ge=1)
    max_solve_seconds: float = Field(300.0, gt=0)  # predicted wall seconds of one solve (mechanisms.cost)
    max_solve_memory_mb: float = Field(2048.0, gt=0)  # predicted memory of one solve
    solve_workers: int = Field(1, ge=1)
    small_solve_workers: int = Field(2, ge=1)
    solve_quota: int = Field(2, ge=1)
    job_stale_s: float = Field(STALE_S, gt=HEARTBEAT_S)  # a solve job lease not renewed for this long is taken over
    # aggregation and the ledger
    max_rows: int = Field(100_000, ge=1)
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    max_request_bytes: int = Field(64 * 1024, ge=1024)
    max_body_memory: int = Field(256 * 1024 * 1024, ge=1024)
    exact_workers: int = Field(2, ge=1)
    #: exact compositions computed at once by all the processes of a server on this machine (each holds 0.5–0.7 GB
    #: while it runs; darrm_opt.ledger.children.MachineSlots, keyed by the database URL)
    composition_slots: int = Field(1, ge=1)
    debit_batch: int = Field(512, ge=1)
    debit_timeout_s: float = Field(60.0, gt=0)
    access_log: bool = True  # one JSON line per request on stderr (api.observability)
    #: GET /metrics: "admin" (an admin key's Bearer header: the scrape names tenants) or "open" (no key: only
    #: where the port is reachable by the scraper alone)
    metrics_auth: Literal["admin", "open"] = "admin"
    body_timeout_s: float = Field(60.0, gt=0, allow_inf_nan=False)  # a body arrives whole within this (408)
    header_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False)  # read by api.protocol (the connection closes)
    migrate_on_start: bool = True
    # tenants
    tenant_rate: float | None = Field(None, gt=0, allow_inf_nan=False)  # requests/s per tenant per process
    tenant_burst: float | None = Field(None, ge=1, allow_inf_nan=False)  # default: one second's requests
    #: the fraction of the time a tenant's near-budget compositions may run in each process while another
    #: tenant's debits come (1: no limit), after the first tenant_exact_burst_s seconds of them
    tenant_exact_share: float = Field(0.1, gt=0, le=1)
    tenant_exact_burst_s: float = Field(2.0, ge=0, allow_inf_nan=False)

    @field_validator("api_keys", "admin_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value

    @field_validator("sqlite_synchronous", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value
