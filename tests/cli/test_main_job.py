"""The README as a new user follows it, on a fresh clone of the repository.

The repository is cloned (its committed files only), set up, and its main job
started with ``scripts/run``: with no logs under the (temporary) home's root it
indexes its demo root into the documented default index.  Then every command of
the README's "For people" block runs as written, with ``scripts/sessionq`` and no
``--db``, and ``browse`` runs on a pseudo-terminal until Esc quits it.

Set-up is the bootstrap's install minus the downloads: the clone's ``.venv`` sees
this environment's installed dependencies (a ``.pth`` file) and installs the clone
itself (``pip install -e .``, which compiles the accelerator); ``scripts/bootstrap``
from nothing is what ``.ci/run`` exercises.  HOME, XDG_DATA_HOME and the root point
into a temporary directory; no ``SESSIONQ_*`` variable is set.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import REPO


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONQ_", "DSH_", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"), COLUMNS="100", TERM="dumb")
    return env


def _clone_and_set_up(clone: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = next(venv.glob("lib/python3*/site-packages"))
    (packages / "sessionq-test-parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check", "-e", str(clone)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    (venv / ".sessionq-installed").touch()  # what scripts/bootstrap leaves after its install


def _readme_commands(readme: str) -> list[str]:
    """The command lines of the README's "For people" block, comments dropped."""
    block = readme.split("For people", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+# .*$", "", line).strip() for line in block.splitlines() if line.strip()]


_ANSI = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|[PX^_].*?\x1b\\|\][^\x07]*\x07|.)", re.S)


def _browse_on_a_terminal(clone: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``scripts/sessionq browse`` on a pseudo-terminal; once the overview is drawn, Esc.
    Returns its exit code and the text it drew (escape sequences removed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command as a person types it
        os.chdir(clone)
        command = str(clone / "scripts" / "sessionq")
        os.execve(command, [command, "browse"], {**env, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
    raw = b""
    sent_at = None
    deadline = time.monotonic() + 60
    poller = select.poll()  # not select(): it refuses descriptors >= 1024, which a long run reaches
    poller.register(fd, select.POLLIN)
    while time.monotonic() < deadline:
        if poller.poll(100):
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child is gone
                break
            if not chunk:
                break
            raw += chunk
        if sent_at is None and b"Enter on a workspace" in _ANSI.sub(b"", raw):
            os.write(fd, b"\x1b")  # Esc on an empty search quits
            sent_at = time.monotonic()
        if sent_at is not None and time.monotonic() - sent_at > 15:
            break
    finished, status = os.waitpid(pid, os.WNOHANG)
    if not finished:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), _ANSI.sub(b"", raw).decode("utf-8", "replace")


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs a git checkout to clone")
def test_the_readme_main_job_and_commands_work_as_written_on_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _clone_and_set_up(clone)
    env = _env(tmp_path)
    default_db = tmp_path / "data" / "sessionq" / "index.db"
    daemon = subprocess.Popen([str(clone / "scripts" / "run"), "--poll", "0.2"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        listed = ""
        while time.monotonic() < deadline and not listed.strip():
            time.sleep(0.3)
            read = subprocess.run([str(clone / "scripts" / "sessionq"), "sessions", "--plain"], cwd=tmp_path, env=env, capture_output=True, text=True)
            listed = read.stdout
        assert listed.strip(), read.stderr
        assert default_db.is_file()  # the documented default index

        commands = _readme_commands((clone / "README.md").read_text())
        assert commands[-1] == "scripts/sessionq browse"
        script = "set -euo pipefail\n" + "".join(f"echo '@@ {command}'\n{command}\n" for command in commands[:-1])
        ran = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
        assert "Traceback" not in ran.stderr and ran.stderr.strip() == "", ran.stderr
        outputs = dict(part.split("\n", 1) if "\n" in part else (part, "") for part in ran.stdout.split("@@ ")[1:])
        assert all(outputs[command].strip() for command in commands[:-1] if not command.startswith("id=")), outputs  # each one answered
        assert "more: --page 3" in outputs['scripts/sessionq search "the" --limit 1 --page 2']

        code, screen = _browse_on_a_terminal(clone, env)
        assert code == 0, screen[-2000:]
        assert "sessions · Enter on a workspace lists all of it" in screen
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=30)
    lines = out.splitlines()
    assert lines[0].startswith("sessionq: no transcripts under") and "demo root" in lines[0]
    assert lines[1].startswith("sessionq: indexing root") and str(default_db) in lines[1]
    assert "Warning" not in err and "Traceback" not in err
