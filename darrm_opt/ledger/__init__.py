"""The privacy-budget ledger: the decision (:mod:`.core`), ledgers on a database (:mod:`.store`, :mod:`.db`,
:mod:`.schema`, Alembic migrations), tables as rows (:mod:`.tables`) and the Python :class:`.local.Ledger`.
Everything but :mod:`.core` needs the ``service`` extra (SQLAlchemy, Alembic)."""
