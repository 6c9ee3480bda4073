"""Long solves: a progress bar on stderr, and Ctrl-C stops cleanly without writing a partial table."""

import os
import queue
import signal
import subprocess
import sys
import threading

import pytest


def _cli(*args):
    return [sys.executable, "-m", "darrm_opt", *args]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_cleanly_and_writes_nothing(tmp_path):
    out = tmp_path / "table.json"
    # K = 101 with Δ > 0: the first "sweeping:" line (stderr is a pipe: one plain line per finished sweep of
    # ≥ 10⁶ multisets) proves the solve is inside its cutting-plane loop, with at least the certification
    # sweeps and the baselines still to come; Ctrl-C then, however fast or loaded the machine is.
    # SIG_DFL in the child: a shell's background job (CI runners, `cmd &`) ignores SIGINT, and Python
    # keeps an inherited SIG_IGN, so Ctrl-C would never reach the solve
    proc = subprocess.Popen(_cli("solve", "--K", "101", "--m", "3", "--format", "json", "--out", str(out)),
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
    env = {**os.environ, "COLUMNS": "120"}
    loud = subprocess.run(_cli("solve", "--K", "31", "--m", "3", "--format", "json", "--no-baselines"),
                          capture_output=True, text=True, timeout=300, env=env)
    assert loud.returncode == 0, loud.stderr
    assert "multisets" in loud.stderr
    quiet = subprocess.run(_cli("solve", "--K", "31", "--m", "3", "--format", "json", "--no-baselines", "-q"),
                           capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""
