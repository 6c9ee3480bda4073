"""``darrm-opt data-dependent``: a data-dependent ledger from the command line (answer, record, publish, show)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from darrm_opt.cli.common import handle_errors, write_output

app = typer.Typer(name="data-dependent", no_args_is_help=True,
                  help="A data-dependent ledger (PATE's sanitised ε): answer or record a job's queries from "
                       "their votes, publish its ε once, show it.")

_LEDGER = typer.Option(..., "--ledger", help="the ledger's name or id")
_DB = typer.Option(None, "--ledger-db", help="ledger database: sqlite:///PATH, a file path or postgresql://... "
                   "(default: $DARRM_DATABASE_URL, else sqlite:///darrm.db)")
_POLICY = typer.Option(None, "--policy", help="a JSON file: the policy of a new ledger, or a plan (plan "
                       "--accounting data-dependent --format json) whose chosen offer holds one")
_VOTES = typer.Option(..., "--votes", help="(N, K) labels or (N, C) vote counts: .npy, .npz, CSV/TSV or - "
                      "(standard input)")


def _policy(path: Path | None) -> Any:
    """The policy in ``path`` (a policy, or a plan document naming one), or None."""
    from darrm_opt.errors import InvalidParameter

    if path is None:
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidParameter("policy", f"cannot read {str(path)!r} as JSON: {exc}") from None
    for found in (doc, doc.get("policy"), (doc.get("run") or {}).get("policy")) if isinstance(doc, dict) else ():
        if isinstance(found, dict) and "aggregator" in found:
            return found
    raise InvalidParameter("policy", f"{str(path)!r} holds no data-dependent policy (a plan must have chosen a "
                           "data-dependent offer: plan --accounting data-dependent)")


def _open(ledger: str, ledger_db: str | None, policy: Path | None) -> Any:
    import os

    from darrm_opt.extras import require

    require("service", "a data-dependent ledger")
    from darrm_opt.release.dd_ledger import DataDependentLedger

    return DataDependentLedger(ledger_db or os.environ.get("DARRM_DATABASE_URL"), ledger, _policy(policy))


def _shown(view: dict) -> str:
    return json.dumps(view, indent=2, default=str)


@app.command("answer")
def answer(ledger: str = _LEDGER, votes: str = _VOTES, ledger_db: Optional[str] = _DB,
           policy: Optional[Path] = _POLICY,
           out: Optional[Path] = typer.Option(None, "--out", help="write the labels here instead of stdout")
           ) -> None:
    """Draw the answers to the job's next queries and account them in one transaction (GNMax or
    Confident-GNMax; −1 is ⊥); nothing is answered beyond the ledger's quota.

    \b
    Example:
      darrm-opt data-dependent answer --ledger job --policy plan.json \\
          --votes counts.npy
    """
    with handle_errors(), _open(ledger, ledger_db, policy) as led:
        labels = led.answer(votes)
        write_output("label\n" + "".join(f"{int(x)}\n" for x in labels), out)


@app.command("record")
def record(ledger: str = _LEDGER, votes: str = _VOTES, ledger_db: Optional[str] = _DB,
           policy: Optional[Path] = _POLICY) -> None:
    """Record the job's next queries (their votes), answered elsewhere; prints the ledger."""
    with handle_errors(), _open(ledger, ledger_db, policy) as led:
        write_output(_shown(led.record(votes)), None)


@app.command("publish")
def publish(ledger: str = _LEDGER, ledger_db: Optional[str] = _DB) -> None:
    """Publish the job's sanitised ε, once (later calls print the same value); the ledger is sealed."""
    with handle_errors(), _open(ledger, ledger_db, None) as led:
        led.publish()
        write_output(_shown(led.view()), None)


@app.command("show")
def show(ledger: str = _LEDGER, ledger_db: Optional[str] = _DB) -> None:
    """The ledger: its policy, queries, what it may state (JSON)."""
    with handle_errors(), _open(ledger, ledger_db, None) as led:
        write_output(_shown(led.view()), None)
