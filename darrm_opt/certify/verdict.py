"""The interface every kind's certificate shares.

A certificate says whether a table is private for its parameters: the largest privacy quantity over
everything it checked (``worst``: a privacy cost f(n) of Lemma 3.4, a pair's excess, a hockey-stick
divergence) against the limit it must stay under (``limit``: e^{ε₀} − 1 + 2δ, or δ), how many cases it
checked (``checked``, of the kind ``what``) and the worst one (``worst_case``). ``to_dict`` is its document
(field names of its own kind).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable


@runtime_checkable
class Verdict(Protocol):
    @property
    def certified(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    @property
    def limit(self) -> float: ...

    @property
    def worst(self) -> float: ...

    @property
    def checked(self) -> int: ...

    @property
    def worst_case(self) -> list[int]: ...

    @property
    def what(self) -> str: ...

    def to_dict(self) -> dict: ...


class VerdictFields:
    """The :class:`Verdict` properties of a certificate dataclass, read from its own fields: a subclass names
    them in ``verdict_fields`` as (limit, worst, checked, worst case) and says what it checked in ``what``."""

    verdict_fields: ClassVar[tuple[str, str, str, str]]
    what: ClassVar[str]

    def _field(self, i: int) -> Any:
        return getattr(self, self.verdict_fields[i])

    @property
    def limit(self) -> float:
        return float(self._field(0))

    @property
    def worst(self) -> float:
        return float(self._field(1))

    @property
    def checked(self) -> int:
        return int(self._field(2))

    @property
    def worst_case(self) -> list[int]:
        return list(self._field(3))
