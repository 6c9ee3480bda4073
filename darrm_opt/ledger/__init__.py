"""The privacy-budget ledger: the decision (:mod:`.core`); ledgers on a database: created and read
(:mod:`.views`), debited by one group-commit writer per process (:mod:`.writer`) whose exact compositions a
scheduler computes with tenant shares (:mod:`.scheduler`), on :mod:`.db`, :mod:`.schema` and Alembic
migrations; tables as rows (:mod:`.tables`) and the Python :class:`.local.Ledger`. The data-dependent mode:
its account, published only as a sanitised ε (:mod:`.dd_account`), on a database (:mod:`.dd_store`) and from
Python (:mod:`.dd_local`).
Everything but :mod:`.core` needs the ``service`` extra (SQLAlchemy, Alembic)."""
