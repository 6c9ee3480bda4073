"""Long solves: a progress bar on stderr, and Ctrl-C stops cleanly without writing a partial table."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

# slow tier: real processes (a K = 51 solve interrupted by SIGINT, progress bars on pipes)
pytestmark = pytest.mark.slow


def _cli(*args):
    return [sys.executable, "-m", "darrm_opt", *args]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_cleanly_and_writes_nothing(tmp_path):
    out = tmp_path / "table.json"
    # K = 51 with Δ > 0: the first "sweeping:" line (stderr is a pipe: one plain line per finished sweep of
    # ≥ 10⁶ multisets) proves the solve is under way, with at least the certification of the baselines and
    # the privacy profile still to come (three more sweeps of 3·10⁸ multisets, about a CPU-second, against the
    # milliseconds this process needs to react); Ctrl-C then, however fast or loaded the machine is.
    # SIG_DFL in the child: a shell's background job (CI runners, `cmd &`) ignores SIGINT, and Python
    # keeps an inherited SIG_IGN, so Ctrl-C would never reach the solve
    proc = subprocess.Popen(_cli("solve", "--K", "51", "--m", "3", "--format", "json", "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()
    seen = []
    try:
        while not (seen and seen[-1].startswith("sweeping:")):
            seen.append(lines.get(timeout=240))
    except queue.Empty:
        proc.kill()
        pytest.fail(f"no progress line in 240 s; stderr so far: {seen}")
    assert proc.poll() is None, seen
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    stderr = "".join(seen) + "".join(lines.queue)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path)]  # no temp file left behind either


def test_progress_bar_on_stderr_and_quiet_silences_it():
    # K = 21, m = 3 is the smallest K whose sweeps (1,184,040 multisets) reach the bar's 10⁶ threshold; the
    # two solves run side by side
    env = {**os.environ, "COLUMNS": "120"}
    args = ("solve", "--K", "21", "--m", "3", "--format", "json", "--no-baselines")
    procs = [subprocess.Popen(_cli(*args, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for extra in ((), ("-q",))]
    (loud_out, loud_err), (quiet_out, quiet_err) = (p.communicate(timeout=300) for p in procs)
    assert procs[0].returncode == 0, loud_err
    assert "multisets" in loud_err
    assert procs[1].returncode == 0 and quiet_err == ""
    assert all(json.loads(out)["certificate"]["certified"] is True for out in (loud_out, quiet_out))


def test_a_swallowed_ctrl_c_still_stops_the_command_and_writes_nothing(tmp_path):
    """Python drops a KeyboardInterrupt raised inside a garbage-collector callback ("Exception ignored in
    ... weakref"); the SIGINT handler also sets a flag, which the next progress event and any output check:
    the command exits 130 and writes nothing even then."""
    from typer.testing import CliRunner

    from darrm_opt.cli import app, common

    out = tmp_path / "t.json"
    common.interrupted.set()  # as after a Ctrl-C whose KeyboardInterrupt was dropped
    try:
        r = CliRunner().invoke(app, ["solve", "--K", "5", "--m", "2", "--format", "json", "--out", str(out)])
    finally:
        common.interrupted.clear()
    assert r.exit_code == 130 and "interrupted" in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == []
    r = CliRunner().invoke(app, ["solve", "--K", "5", "--m", "2", "--format", "json", "--out", str(out)])
    assert r.exit_code == 0 and json.loads(out.read_text())["certificate"]["certified"] is True
