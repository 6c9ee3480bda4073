"""Modules imported on first use, so that commands which never reach them do not pay for the import.

``scipy.fft`` costs about 0.3–0.5 s of CPU to import; the sweep and the pmf code need it only once they
compute, so a table file that is refused while it is read (or ``--help``) never imports it.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name``: the first access to an attribute imports the module and keeps the
    attribute on this object, so later accesses (in the sweeps' loops) are plain attribute lookups."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:  # only called for attributes not yet kept
        value = getattr(importlib.import_module(object.__getattribute__(self, "_name")), attr)
        object.__setattr__(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {object.__getattribute__(self, '_name')!r}>"


#: ``scipy.fft``, imported when first used
sfft: Any = LazyModule("scipy.fft")
