"""The registry of mechanisms: one line per kind (adding a kind is one module and one line here)."""

from __future__ import annotations

from .base import Mechanism
from .darrm import Darrm
from .darrm_multiclass import DarrmMulticlass
from .darrm_multiclass_shaped import DarrmMulticlassShaped
from .darrm_multiclass_top2 import DarrmMulticlassTop2
from .darrm_pate import DarrmPate
from .darrm_pate_shaped import DarrmPateShaped
from .gaussian_mean import GaussianMean
from .gnmax import ConfidentGnmax, Gnmax
from .stability import Stability

#: every kind of release, by its name
MECHANISMS: dict[str, Mechanism] = {m.kind: m for m in (
    Darrm(),
    DarrmPate(),
    DarrmPateShaped(),
    DarrmMulticlass(),
    Gnmax(),
    ConfidentGnmax(),
    DarrmMulticlassShaped(),
    DarrmMulticlassTop2(),
    GaussianMean(),
    Stability(),
)}
