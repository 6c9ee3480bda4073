"""Long solves: a progress bar on stderr, and Ctrl-C stops cleanly without writing a partial table."""

import os
import signal
import subprocess
import sys
import time

import pytest


def _cli(*args):
    return [sys.executable, "-m", "darrm_opt", *args]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_cleanly_and_writes_nothing(tmp_path):
    out = tmp_path / "table.json"
    # K = 101 with Δ > 0 takes about 40 s on 2 cores; 6 s is past start-up, inside the cutting-plane loop
    proc = subprocess.Popen(_cli("solve", "--K", "101", "--m", "3", "--format", "json", "--out", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6.0)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
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
