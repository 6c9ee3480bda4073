"""``darrm-opt aggregate``: DaRRM answers for a CSV of votes, offline, optionally paid from a ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import err_console, handle_errors, write_output
from darrm_opt.cli.options import TabularFormat, number_pair


def read_vectors(path: Path):
    """The teachers' vectors of an .npy file, or of an .npz file's ``outputs`` array (or its only array): a
    (rows, K, dim) float array; an unreadable file is an error naming it (the values are checked by the
    table's sampler)."""
    import zipfile

    import numpy as np

    from darrm_opt.errors import TableFileError

    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                names = list(data.files)
                if "outputs" not in names and len(names) != 1:
                    raise TableFileError(f"votes file {str(path)!r} holds {', '.join(names)}: name the teachers' "
                                         "array 'outputs'")
                data = data["outputs" if "outputs" in names else names[0]]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TableFileError(f"cannot read votes file {str(path)!r} as .npy/.npz: {exc}") from None
    return data


def aggregate(
    table: Path = typer.Option(..., "--table", help="a γ table JSON file (darrm-opt solve --format json), "
                               "binary or multi-class (--classes)"),
    votes: Path = typer.Option(..., "--votes", help="the votes: (N, K) labels (0/1 for a binary table, class "
                               "labels 0..C-1 for a multi-class one) or (N, C) counts (each row sums to K), "
                               "as .npy, .npz, CSV/TSV (delimiter , ; tab or spaces, an optional header row, "
                               "1.0 read as 1) or - for standard input; for a gaussian-mean table an .npy/.npz "
                               "array (rows, K, dim) of teachers' outputs in [0, 1]"),
    ledger_db: Optional[str] = typer.Option(
        None, "--ledger-db", help="ledger database: sqlite:///PATH, a file path or postgresql://USER@HOST/DB "
        "(default: $DARRM_DATABASE_URL, else sqlite:///darrm.db, as the service)"),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="pay from this ledger (name or id)"),
    budget: Optional[str] = typer.Option(None, "--budget", help="EPS,DELTA: the total budget of a new ledger (as "
                                         "plan and label take it)"),
    epsilon_budget: Optional[float] = typer.Option(None, "--epsilon-budget", help="ε budget of a new ledger "
                                                   "(the EPS of --budget)"),
    delta_budget: Optional[float] = typer.Option(None, "--delta-budget", help="δ budget of a new ledger "
                                                 "(the DELTA of --budget)"),
    records: Optional[Path] = typer.Option(
        None, "--records", help="with --ledger: a text file of record ids, one per line, one per vote row (in "
        "order; 1 to 200 printable characters each); a row whose record the ledger answered before gets that "
        "answer again at no cost, a record named twice is answered and paid once"),
    no_ledger: bool = typer.Option(False, "--no-ledger", help="release without a ledger, knowingly: nothing is "
                                   "accounted (without it, a line on stderr says so)"),
    fmt: TabularFormat = typer.Option(TabularFormat.csv, "--format", help="csv | json"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the answers here instead of stdout"),
) -> None:
    """Answer each vote row with DaRRM (Algorithm 1) using a certified γ table; with a multi-class table
    (class labels), multi-class DaRRM: the plurality class with probability γ(gap), else a uniform class;
    with a gaussian-mean table, the noisy mean of each row's K vectors (clipped to the table's radius).

    The table is certified again before use. With --ledger the batch is paid for first, atomically and
    durably, with the service's ledger code (its answers compose exactly, from the table's privacy profile
    computed here), and only then drawn; a batch that does not fit releases nothing and exits 1. With
    --records the rows whose record the ledger answered before get the stored answer and are not paid (the
    output names them: column reanswered in CSV, reanswered and changed row indices in JSON).

    \b
    Example:
      darrm-opt aggregate --table t11.json --votes votes.csv --ledger job-1 \\
          --budget 10,1e-3
    """
    import os

    from darrm_opt.errors import InvalidParameter
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.release.release import Aggregator
    from darrm_opt.release.table_file import load_certified
    from darrm_opt.release.votes import read_votes

    with handle_errors():
        if budget is not None:
            if epsilon_budget is not None or delta_budget is not None:
                raise InvalidParameter("budget", "give --budget EPS,DELTA or --epsilon-budget/--delta-budget, "
                                       "not both")
            epsilon_budget, delta_budget = number_pair(budget, "budget")
        if ledger is None and (ledger_db or epsilon_budget is not None or delta_budget is not None):
            raise InvalidParameter("ledger", "--ledger-db and --budget need --ledger NAME")
        if ledger is not None and no_ledger:
            raise InvalidParameter("no-ledger", "contradicts --ledger NAME: give one of them")
        if records is not None and ledger is None:
            raise InvalidParameter("records", "need --ledger NAME (the ledger keeps the answers of its records)")
        certified = load_certified(table, profile=ledger is not None)
        if mechanism(certified.kind).votes_file == "npy":
            if records is not None:
                raise InvalidParameter("records", f"apply to vote rows; a {certified.kind} table answers vectors")
            rows = read_vectors(votes)
        else:
            rows = read_votes(str(votes), K=certified.K, classes=certified.classes or 2).labels
        ids = None if records is None else read_records(records)
        spend = released = None
        if ledger is not None:
            local_ledger = _require_service_extra()
            url = ledger_db or os.environ.get("DARRM_DATABASE_URL")
            with local_ledger.Ledger(url, ledger, epsilon_budget=epsilon_budget, delta_budget=delta_budget) as book:
                if ids is not None:
                    released = Aggregator(certified, book).answer(rows, ids)
                    answers = released.answers
                else:
                    answers = Aggregator(certified, book)(rows)
                spend = book.view()
        else:
            answers = Aggregator(certified)(rows)
            if not no_ledger:
                err_console.print(f"no ledger: nothing was accounted for these {len(answers)} answers; their "
                                  "privacy is yours to account (--ledger NAME --budget EPS,DELTA pays for them "
                                  "first; --no-ledger releases knowingly)", soft_wrap=True, markup=False)
        write_output(_render(answers, certified, spend, fmt, ids, released), out)
        if released is not None and released.reanswered:
            err_console.print(f"{len(released.reanswered)} row(s) answered before: their stored answers, nothing "
                              f"paid ({len(released.changed)} asked with other votes than their record was "
                              "answered for)", soft_wrap=True, markup=False)
        if spend is not None:
            err_console.print(
                f"ledger {spend['name']!r}: {spend['answers']} answers, spent ε={spend['epsilon_spent']:.6g} of "
                f"{spend['epsilon_budget']:g} at δ={spend['delta_target']:.3e} "
                f"({spend['composition']} composition)", soft_wrap=True, markup=False)


def _require_service_extra():
    """``darrm_opt.ledger.local``, or MissingExtra (exit 2) naming the extra to install."""
    from darrm_opt.extras import require

    require("service", "a ledger (--ledger)")
    import darrm_opt.ledger.local

    return darrm_opt.ledger.local


def read_records(path: Path) -> list[str]:
    """The record ids of ``path`` (or ``-``: standard input): one per non-blank line, ends stripped (checked
    against the rows by the ledger: InvalidParameter naming records)."""
    import sys

    from darrm_opt.errors import InvalidParameter

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameter("records", f"cannot read {str(path)!r}: {exc}") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _render(answers, table, spend: dict | None, fmt: TabularFormat, ids: list[str] | None = None,
            released=None) -> str:  # noqa: ANN001
    vectors = answers.ndim == 2  # a mean per row (else one class per row)
    again = set() if released is None else set(released.reanswered)
    if fmt is TabularFormat.json:
        doc = {"table_id": table.id, **table.params.canonical(), "teachers": table.teachers,
               "answers": answers.tolist() if vectors else [int(a) for a in answers]}
        if ids is not None and released is not None:
            doc.update(records=ids, reanswered=list(released.reanswered), changed=list(released.changed))
        if spend is not None:
            doc["ledger"] = {k: spend[k] for k in ("id", "name", "epsilon_budget", "delta_budget", "answers",
                                                   "epsilon_spent", "delta_target", "composition",
                                                   "epsilon_remaining")}
        return json.dumps(doc, indent=2)
    if vectors:
        head = ",".join(f"answer_{j}" for j in range(answers.shape[1]))
        return head + "\n" + "".join(",".join(repr(float(x)) for x in row) + "\n" for row in answers)
    if ids is not None:
        return "record,answer,reanswered\n" + "".join(
            f"{_cell(r)},{int(a)},{int(j in again)}\n" for j, (r, a) in enumerate(zip(ids, answers, strict=True)))
    return "answer\n" + "".join(f"{int(a)}\n" for a in answers)


def _cell(text: str) -> str:
    """A CSV cell: quoted (inner quotes doubled) when it holds a comma, a quote or leading/trailing spaces."""
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"') else text
