"""What a served table of each kind looks like on the wire: one common base (:class:`TableOutBase`, the fields
every served table has) and the field families the kinds share. Each kind's own model, in its module, is a
family with ``kind: Literal["<its name>"]`` and is named by its mechanism's ``output_model``; the service's
table output is the union of the registered kinds' models, discriminated on ``kind``
(:func:`darrm_opt.mechanisms.table_output_union`).

These are pydantic models (a core dependency) so that the REST API's /openapi.json states every kind exactly;
nothing here imports the service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from darrm_opt.certify.certificate import Certificate
from darrm_opt.certify.pairs import PairCertificate

Teachers = Literal["shared", "disjoint-private", "disjoint-nonprivate"]


class TableOutBase(BaseModel):
    """A certified table as the service serves it: the fields of every kind."""

    id: str = Field(..., description="hash of the table's content: kind, parameters, setting and γ")
    kind: str = Field(..., description="the mechanism (one of the registered kinds)")
    K: int
    teachers: Teachers
    setting: dict[str, Any] | None = Field(None, description="the teacher setting, what it implies and its "
                                                             "total_cap (disjoint-private)")
    solver: str
    gamma: list[float] = Field(..., description="the certified table (empty for a kind without one)")
    certificate: Any = Field(..., description="the kind's certificate of the table (each family states its form)")
    privacy_profile: dict[str, Any] | None = Field(
        None, description="the table's certified privacy profile: swept (ε, δ) statements, envelope vertices, "
                          "the dominating pair's atoms (P-mass, Q-mass) and infinite-loss mass")
    expected_error: float
    solve_seconds: float
    created_at: datetime


class BinaryTableOut(TableOutBase):
    """A certified binary table: shared-data (the paper's setting), disjoint-private, or the PATE setting
    (disjoint-nonprivate: no m, no teacher Δ, ``epsilon`` the per-answer ε)."""

    kind: str = Field(..., description="the mechanism: darrm (teachers on shared data or disjoint-private) | "
                                       "darrm-pate (the PATE setting)")
    m: float | None = Field(..., description="null for disjoint-nonprivate")
    epsilon: float = Field(..., description="each teacher's epsilon; the answer's epsilon for disjoint-nonprivate")
    teacher_delta: float | None = Field(..., description="null for disjoint-nonprivate")
    delta: float
    prior: str
    teachers: Teachers = "shared"
    gamma: list[float] = Field(..., description="γ(0..K), certified")
    #: the library's own dataclasses: every corner multiset (shared data), every (l, l ± 1) pair (PATE)
    certificate: Certificate | PairCertificate


class MulticlassTableOut(TableOutBase):
    """A certified multi-class table: γ[g] for the gap g between the top two vote counts (g = 0: a tie), or
    for the top-two rule (p, q) over the states (g₁, min(g₂, gap_cap))."""

    classes: int
    gap_cap: int | None = Field(None, description="darrm-multiclass-top2: the cap G on the second gap g₂")
    teachers: Literal["disjoint-nonprivate"]
    target_epsilon: float = Field(..., description="each answer's epsilon")
    delta: float = Field(..., description="each answer's delta")
    prior: str
    gamma: list[float] = Field(..., description="γ(0..K) by gap, certified")
    certificate: dict[str, Any] = Field(..., description="every neighbouring histogram type checked "
                                                         "(darrm_opt.certify.multiclass)")


class GaussianTableOut(TableOutBase):
    """A Gaussian release (GNMax, or Confident-GNMax whose ⊥ answers are written −1): no γ table, its
    parameters define it; its certificate states the per-answer (ε₀, δ₀) read off its exact Gaussian pair."""

    classes: int
    teachers: Literal["disjoint-nonprivate"]
    sigma: float | None = Field(None, description="gnmax: the noise N_Z(0, σ²) per class")
    threshold: float | None = Field(None, description="confident-gnmax: ⊥ (−1) unless top count + N_Z(0, σ₁²) ≥ T")
    sigma1: float | None = None
    sigma2: float | None = None
    prior: str
    gamma: list[float] = Field(..., description="empty: the release has no table")
    certificate: dict[str, Any]


class ShapedTableOut(TableOutBase):
    """A composition-shaped table: its whole privacy profile under the generalized normal target of shape β
    and scale α (``target_scale``) at ``slopes`` slopes up to ε′ = ``slope_max`` (docs/shaped-tables.md)."""

    teachers: Literal["disjoint-nonprivate"]
    classes: int | None = Field(None, description="C: class-label votes (null for 0/1 votes)")
    target_family: Literal["gennorm"] = Field(..., description="the target curve's family (generalized normal)")
    beta: float = Field(..., description="β: the target's shape")
    target_scale: float = Field(..., description="α: the target's scale")
    slopes: int = Field(..., description="J: the slopes at which the profile is certified under the target")
    slope_max: float = Field(..., description="the largest slope ε′ checked")
    prior: str
    gamma: list[float] = Field(..., description="γ(0..K), certified under the target at every slope")
    certificate: dict[str, Any] = Field(..., description="every (slope, neighbouring pair) checked "
                                                         "(darrm_opt.certify.shaped)")


class MeanTableOut(TableOutBase):
    """A Gaussian mean release (docs/gaussian-mean.md): no γ; its parameters define it."""

    dim: int = Field(..., description="l: the length of each teacher's vector")
    radius: float = Field(..., description="the clip radius R of each teacher's vector (L2)")
    lattice: float = Field(..., description="the lattice step g (a power of two)")
    noise: int = Field(..., description="n: the discrete Gaussian N_Z(0, n²) on the lattice sum; σ = n·g/K")
    delta: float = Field(..., description="δ₀ of the per-answer statement")
    teachers: Literal["disjoint-nonprivate"]
    gamma: list[float] = Field(..., description="empty")
    certificate: dict[str, Any] = Field(..., description="the per-answer statement of the Gaussian pair")
    expected_error: float = Field(..., description="dim·σ², the expected squared error of a released mean")
