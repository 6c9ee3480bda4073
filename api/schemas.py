"""Request and response bodies of the REST API (they define /openapi.json)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from darrm_opt.mechanisms import table_output_union
from darrm_opt.mechanisms.outputs import BinaryTableOut, TableOutBase, Teachers

#: ids of tables, ledgers and jobs (hex digests and uuids; other safe words simply are not found)
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
Id = Annotated[str, Field(pattern=ID_PATTERN, description="an id (letters, digits, '-', '_')")]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _plain_text(value: str) -> str:
    """Printable text that every database stores: no control characters, valid UTF-8 (no lone surrogates)."""
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


PlainText = Annotated[str, AfterValidator(_plain_text)]
#: the longest prior a request body carries: a ``counts:`` prior writes out the law of L in up to K + 1 items
#: (about 25 characters each at full precision, K <= 2001); a list filter in a URL takes at most PRIOR_QUERY_CHARS
PRIOR_CHARS = 65_536
PRIOR_QUERY_CHARS = 4_096
#: a client's record id (darrm_opt.ledger.core.record_ids): 1 to 200 printable characters, or an integer
RecordId = Annotated[int, Field(ge=-(2**63), lt=2**63)] | Annotated[str, Field(min_length=1, max_length=200),
                                                                     AfterValidator(_plain_text)]


#: a binary DaRRM table's fields (:mod:`darrm_opt.mechanisms.outputs`), which a DaRRM plan's answer extends
TableOut = BinaryTableOut


class ErrorOut(BaseModel):
    detail: str


class BudgetExceededOut(BaseModel):
    detail: str
    epsilon_spent: float = Field(..., description="the ledger's stated ε (unchanged: nothing was paid)")
    delta_target: float = Field(..., description="the ledger's fixed δ (its delta_budget)")
    composition: str
    answers: int


#: the most teachers a request may name (the kinds' own limits and DARRM_MAX_MULTISETS refuse far fewer, with
#: a message; this bound keeps numbers that no float holds out of the parameters)
MAX_K = 1_000_000

_NULL = {"type": "null"}


def absent(*names: str) -> list[dict[str, Any]]:
    """JSON Schema: none of ``names`` is given."""
    return [{"not": {"required": [n]}} for n in names]


def when(field: str, value: str, then: dict[str, Any], otherwise: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema: ``then`` when ``field`` is given as ``value``, else ``otherwise`` (a cross-field rule the
    service enforces, stated so that a client generating requests from the schema meets it)."""
    return {"if": {"required": [field], "properties": {field: {"const": value}}}, "then": then, "else": otherwise}


#: TableRequest's rules (darrm_opt.model.neighbours.check_setting_options): disjoint-nonprivate takes
#: target_epsilon and none of m, epsilon, teacher_delta; every other setting needs m, takes no target_epsilon
#: and no classes (a multi-class table is for disjoint-nonprivate teachers only)
TABLE_RULES: dict[str, Any] = {"allOf": [when(
    "teachers", "disjoint-nonprivate",
    {"required": ["target_epsilon"], "properties": {"m": _NULL, "target_epsilon": {"type": "number"}},
     "allOf": absent("epsilon", "teacher_delta")},
    {"required": ["m"], "properties": {"m": {"type": "number"}, "target_epsilon": _NULL, "classes": _NULL}},
)]}


class TableRequest(BaseModel):
    """Parameters of a DaRRM problem: K teachers, each (ε, Δ)-DP; the answer is (mε, δ)-DP. With ``classes``:
    a multi-class table (class-label votes) for teachers trained non-privately on disjoint shards, each answer
    (target_epsilon, delta)-DP (m, epsilon and teacher_delta do not apply)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=TABLE_RULES)  # "1", true: not numbers

    K: int = Field(..., ge=1, le=MAX_K, description="number of teachers (odd for a binary table, except "
                                          "disjoint-nonprivate: a tie is a fair coin)")
    m: float | None = Field(None, ge=1, allow_inf_nan=False,
                            description="privacy allowance, 1 <= m <= K (required for a binary table)")
    classes: int | None = Field(None, ge=2, le=1000, description="C: a multi-class table over classes 0..C-1")
    teachers: Teachers | None = Field(
        None, description="shared (default: the paper's setting) | disjoint-private (the teachers' (epsilon, "
                          "teacher_delta) caps the total) | disjoint-nonprivate (PATE: non-private teachers on "
                          "disjoint shards; m, epsilon, teacher_delta do not apply; the only setting with classes)")
    target_epsilon: float | None = Field(None, gt=0, le=700, allow_inf_nan=False,
                                         description="disjoint-nonprivate only: the per-answer epsilon")
    epsilon: float = Field(0.1, gt=0, allow_inf_nan=False, description="each teacher's epsilon")
    teacher_delta: float = Field(1e-5, ge=0, lt=1, description="each teacher's delta (Δ)")
    delta: float | None = Field(
        None, ge=0, lt=1, description="the answer's delta; default 1 - (1 - teacher_delta)^m"
    )
    prior: PlainText = Field("paper", min_length=1, max_length=PRIOR_CHARS,
                       description="'paper', 'iid-uniform:A,B', 'common-uniform:A,B' or 'counts:L=W,A..B=W,...'")
    subsample: int | None = Field(None, ge=1, le=MAX_K, description=(
        "disjoint-nonprivate binary tables only: each answer reads a uniform random subset of this many of the "
        "K teachers (1 <= subsample <= K; default all K), the table solved for them and its cost amplified; "
        "refused for teachers on shared data"))
    solver: PlainText | None = Field(None, min_length=1, max_length=20,
                                     description="highs (default), gurobi or cbc")


#: a served table of any registered kind (each kind's ``output_model``), discriminated on ``kind``
if TYPE_CHECKING:
    AnyTableOut = TableOutBase
else:
    AnyTableOut = table_output_union()


class TableListOut(BaseModel):
    items: list[AnyTableOut]
    total: int
    limit: int
    offset: int


class JobAccepted(BaseModel):
    job_id: str
    status: str
    status_url: str


class JobOut(BaseModel):
    job_id: str
    status: Literal["queued", "running", "done", "failed", "stale"]
    stage: str
    progress: dict[str, Any]
    error: str | None = None
    table_id: str | None = None
    table: AnyTableOut | None = None


class LedgerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": [when(  # "1", true: not numbers
        "teachers", "disjoint-private",
        {"required": ["teacher_epsilon", "teacher_delta"],
         "properties": {"teacher_epsilon": {"type": "number"}, "teacher_delta": {"type": "number"}}},
        {"properties": {"teacher_epsilon": _NULL, "teacher_delta": _NULL}},
    )]})

    name: PlainText = Field(..., min_length=1, max_length=200)
    epsilon_budget: float = Field(..., gt=0, allow_inf_nan=False)
    delta_budget: float = Field(..., ge=0, lt=1)
    teachers: Literal["shared", "disjoint-private"] = Field(
        "shared", description="disjoint-private: teachers on disjoint shards, each (teacher_epsilon, "
                              "teacher_delta)-DP; by parallel composition that caps the ledger's total")
    teacher_epsilon: float | None = Field(None, gt=0, allow_inf_nan=False)
    teacher_delta: float | None = Field(None, ge=0, lt=1)

    @model_validator(mode="after")
    def _cap_fields(self) -> LedgerRequest:
        given = (self.teacher_epsilon is not None, self.teacher_delta is not None)
        if self.teachers == "disjoint-private" and not all(given):
            raise ValueError("teachers 'disjoint-private' needs teacher_epsilon and teacher_delta")
        if self.teachers == "shared" and any(given):
            raise ValueError("teacher_epsilon and teacher_delta only apply to teachers 'disjoint-private'")
        return self


class BoundOut(BaseModel):
    epsilon: float | None = Field(..., description="null when the method cannot meet delta_budget")
    delta: float


class GroupOut(BaseModel):
    table_id: str
    epsilon0: float = Field(..., description="per-answer epsilon (m * epsilon of the table)")
    delta0: float = Field(..., description="per-answer delta of the table")
    answers: int


class LedgerSpend(BaseModel):
    """A ledger's budgets and its spend (shared by the full view and the list). Every statement is
    "(epsilon_spent, delta_target)-DP": ε at the ledger's fixed δ target, never decreasing as answers are
    added."""

    id: str
    name: str
    tenant: str = Field(..., description="the tenant that owns the ledger (its keys alone spend from it)")
    epsilon_budget: float
    delta_budget: float
    answers: int
    epsilon_spent: float = Field(..., description="ε of all answers so far at delta_target (monotone)")
    delta_target: float = Field(..., description="the fixed δ of every statement: the ledger's delta_budget")
    epsilon_remaining: float = Field(..., description="epsilon_budget − epsilon_spent (≥ 0)")
    composition: str = Field(..., description="the composition the spend is computed by")
    created_at: datetime


class LedgerOut(LedgerSpend):
    bounds: dict[str, BoundOut] = Field(..., description="every method's bound at delta_budget")
    groups: list[GroupOut]
    teachers: str = Field("shared", description="shared | disjoint-private")
    total_cap: BoundOut | None = Field(None, description="disjoint-private: the teachers' (ε, Δ), which caps "
                                                         "the total by parallel composition")


class AggregateOut(BaseModel):
    answers: list[int]
    epsilon_spent: float = Field(..., description="the ledger's ε after this request, at delta_target")
    delta_target: float = Field(..., description="the ledger's fixed δ (its delta_budget)")
    composition: str
    ledger_answers: int
    replayed: bool = False
    reanswered: list[int] = Field([], description="rows given their record's stored answer at no cost (their "
                                                  "record id was answered before, or earlier in this request)")
    changed: list[int] = Field([], description="of the reanswered rows, those whose votes differ from the ones "
                                               "their record was answered for (the stored answer is returned)")


class StatusOut(BaseModel):
    status: str


class ValidationErrorOut(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class HTTPValidationErrorOut(BaseModel):
    detail: list[ValidationErrorOut]
