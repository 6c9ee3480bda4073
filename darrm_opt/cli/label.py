"""``darrm-opt label``: a labelling job in one command (plan, ledger, pay, release, statement)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from darrm_opt.cli.common import JobProgress, err_console, handle_errors, write_output
from darrm_opt.cli.options import TabularFormat, Teachers, number_pair


def label(
    votes: str = typer.Option(..., "--votes", help="the teachers' votes: (N, K) class labels or (N, C) vote counts "
                              "(each row sums to K), as .npy, .npz (array 'votes'), CSV/TSV, or - for standard "
                              "input"),
    budget: str = typer.Option(..., "--budget", help="EPS,DELTA: the total budget of the whole job"),
    classes: Optional[int] = typer.Option(None, "--classes", help="C classes (default: counts' columns, or the "
                                          "largest label + 1, at least 2)"),
    votes_form: str = typer.Option("auto", "--votes-form", help="auto | labels | counts (auto: rows that all "
                                   "sum to one total above their number of columns are counts)"),
    teachers: Teachers = typer.Option(Teachers.disjoint_nonprivate, "--teachers",
                                      help="disjoint-nonprivate (PATE, the default) | shared | disjoint-private"),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="each teacher's ε (shared, disjoint-private)"),
    teacher_delta: Optional[float] = typer.Option(None, "--teacher-delta",
                                                  help="each teacher's Δ (shared, disjoint-private)"),
    prior: str = typer.Option("paper", "--prior", help="the prior over the votes the plan optimises for"),
    queries: Optional[int] = typer.Option(None, "--queries", help="Q answers the plan covers (default: N)"),
    ledger: str = typer.Option("label", "--ledger", help="the job's ledger (name or id): created with the "
                               "budget, resumed when it exists"),
    ledger_db: Optional[str] = typer.Option(
        None, "--ledger-db", help="ledger database: sqlite:///PATH, a file path or postgresql://USER@HOST/DB "
        "(default: $DARRM_DATABASE_URL, else sqlite:///darrm.db)"),
    solver: str = typer.Option("highs", "--solver", help="highs | gurobi | cbc"),
    mechanism_name: Optional[str] = typer.Option(None, "--mechanism", help="plan over this kind only (darrm, "
                                                 "darrm-pate, darrm-multiclass, gnmax, ...; default: every kind)"),
    fmt: TabularFormat = typer.Option(TabularFormat.csv, "--format", help="csv (record,label) | json (labels "
                                      "and statement)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the labels here instead of stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress on stderr"),
) -> None:
    """Label N queries from their teachers' votes within a total budget, in one command: plan the most
    accurate certified table whose N answers fit the budget in the worst case (every mechanism), open the
    ledger (or resume it), pay for the answers durably, release them and print the privacy statement.

    A rerun with the same ledger continues the job: the records answered before are returned as stored
    and paid once; only new rows (the votes grew) are answered and paid. The statement (stderr, and
    in --format json) is what the ledger states for all its answers: ε at its δ, worst case.

    \b
    Example:
      darrm-opt label --votes counts.npy --budget 2,1e-5 --out labels.csv
    """
    from darrm_opt.release.label import label as run_label

    with handle_errors():
        eps, delta = number_pair(budget, "budget")
        with _Progress(quiet) as progress:
            result = run_label(votes, (eps, delta), classes=classes, form=votes_form, teachers=teachers.value,
                               epsilon=epsilon, teacher_delta=teacher_delta, prior=prior, queries=queries,
                               ledger=ledger, ledger_db=ledger_db, solver=solver, progress=progress,
                               kinds=None if mechanism_name in (None, "auto") else [mechanism_name])
        if fmt is TabularFormat.json:
            text = json.dumps({"labels": [int(x) for x in result.labels], "statement": result.statement,
                               "text": result.text}, indent=2)
        else:
            text = "record,label\n" + "".join(f"{i},{int(x)}\n" for i, x in enumerate(result.labels))
        write_output(text, out)
        err_console.print(result.text, soft_wrap=True, markup=False)


class _Progress(JobProgress):
    """The job's steps on stderr: a line per step, a bar (or, in logs, a line) per mechanism's offer searched
    and per solve's sweep, and the current step while it pays."""

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, stage: str, **info) -> None:
        if stage == "plan" and info.get("step") in ("kind", "offer"):
            step = info.pop("step")
            return super().__call__(step, **info)
        if stage == "votes":
            self.line(f"votes: N = {info['N']} queries, K = {info['K']} teachers, C = {info['classes']} classes "
                      f"(read as {info['form']})")
        elif stage == "plan" and info.get("step") == "start":
            self.line(f"plan: {info['queries']} answers, every mechanism")
        elif stage == "plan" and info.get("step") == "chosen":
            self.line(f"plan: chosen {info['kind']} (E[error] {info['expected_error']:.4g}, ε "
                      f"{info['epsilon_spent']:.6g} for the planned answers), table {info['table_id']}")
        elif stage == "resume":
            self.line(f"resume: {info['answered']} records answered before with table {info['table_id']}")
        elif stage == "pay":
            self.line(f"pay: {info['rows']} answers from record {info['first']}")
            self.phase("paying and releasing")
        elif stage != "done":
            super().__call__(stage, **info)
