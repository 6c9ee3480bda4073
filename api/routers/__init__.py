"""HTTP routers: health, tables and jobs, ledgers, aggregate."""
