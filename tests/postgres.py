"""A throwaway PostgreSQL server for the tests (or the one ``$SESSIONQ_TEST_PG`` names).

:func:`start_cluster` runs Debian's ``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/<version>/bin`` (or ``$PATH``) on a fresh data directory
in a temporary directory, listening on a Unix socket there only (no TCP), with
fsync off: about a second.  Its superuser ``postgres`` has a random password
(``scram-sha-256``), so the tests exercise real credentials (URL,
``PGPASSWORD``, a password file).  initdb refuses to run as root, so as root the
cluster belongs to the ``postgres`` system user (``runuser``); as anyone else,
to that user.  ``.ci/run`` installs Debian's ``postgresql`` when it is missing.

With ``$SESSIONQ_TEST_PG`` set (a ``postgresql://`` URL of a server whose user
may create databases) nothing is started.  Each test gets its own database
(:meth:`Server.database`), dropped afterwards.

When no server can be had, the PostgreSQL tests skip with the reason locally
and *fail* under CI (``CI=true``), so a CI run never passes without them.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

ENV_URL = "SESSIONQ_TEST_PG"


class NoServer(RuntimeError):
    """No PostgreSQL server could be started or reached; the message says why."""


def _bindir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise NoServer("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")


@dataclass
class Server:
    """A running server: its base URL (database ``postgres``) and, when we started it, how to stop it."""

    url: str
    host: str | None = None
    password: str | None = None
    stop_command: list[str] | None = None
    workdir: str | None = None
    restart_command: list[str] | None = None
    databases: list[str] = field(default_factory=list)

    def url_for(self, database: str) -> str:
        base, _, query = self.url.partition("?")
        return base.rsplit("/", 1)[0] + "/" + database + (("?" + query) if query else "")

    def database(self) -> str:
        """A fresh, empty database; its URL (``postgresql://``)."""
        import psycopg

        name = "sessionq_test_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return self.url_for(name)

    def drop(self, url: str) -> None:
        import psycopg

        name = url.partition("?")[0].rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def restart(self) -> None:
        """``pg_ctl restart`` of a throwaway cluster (every connection is dropped); a test of an
        external server (``$SESSIONQ_TEST_PG``) that needs this skips."""
        import pytest

        if self.restart_command is None:
            pytest.skip("the PostgreSQL server is not a throwaway cluster this run can restart")
        done = subprocess.run(self.restart_command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def stop(self) -> None:
        if self.stop_command is not None:
            subprocess.run(self.stop_command, capture_output=True, timeout=60)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _as_cluster_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise NoServer("running as root and there is no 'postgres' user to own a throwaway cluster (initdb refuses root)") from None
    return ["runuser", "-u", "postgres", "--", *command]


def start_cluster() -> Server:
    """initdb + pg_ctl start on a Unix socket in a new temporary directory; raises :class:`NoServer`."""
    bindir = _bindir()
    workdir = tempfile.mkdtemp(prefix="sessionq-pg-")
    data = os.path.join(workdir, "data")
    if os.geteuid() == 0:
        _as_cluster_user(["true"])  # the user check, before chown
        entry = pwd.getpwnam("postgres")
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
    password = secrets.token_hex(16)
    pwfile = os.path.join(workdir, "pwfile")
    with open(pwfile, "w") as fh:
        fh.write(password + "\n")
    if os.geteuid() == 0:
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    initdb = _as_cluster_user(
        [str(bindir / "initdb"), "-D", data, "-A", "scram-sha-256", "--pwfile", pwfile, "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]
    )
    done = subprocess.run(initdb, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        raise NoServer(f"initdb failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    options = f"-k {workdir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
    start = _as_cluster_user([str(bindir / "pg_ctl"), "-D", data, "-l", os.path.join(workdir, "log"), "-o", options, "-w", "-t", "60", "start"])
    done = subprocess.run(start, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        log = Path(workdir, "log").read_text(errors="replace") if Path(workdir, "log").exists() else ""
        shutil.rmtree(workdir, ignore_errors=True)
        raise NoServer(f"pg_ctl start failed: {done.stderr.strip()} {log.strip()[-500:]}")
    stop = _as_cluster_user([str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"])
    restart = _as_cluster_user([str(bindir / "pg_ctl"), "-D", data, "-l", os.path.join(workdir, "log"), "-m", "fast", "-w", "-t", "60", "restart"])
    os.unlink(pwfile)
    return Server(
        f"postgresql://postgres:{password}@/postgres?host={quote(workdir, safe='/')}",
        host=workdir, password=password, stop_command=stop, workdir=workdir, restart_command=restart,
    )  # fmt: skip


def _password_of(url: str) -> str | None:
    from sqlalchemy.engine import make_url

    return make_url(url).password


def acquire_server() -> Server:
    """The server the tests use: ``$SESSIONQ_TEST_PG``, else a throwaway cluster; raises :class:`NoServer`."""
    try:
        import psycopg
    except ImportError:
        raise NoServer("the psycopg driver is not installed") from None
    url = os.environ.get(ENV_URL)
    server = Server(url, password=_password_of(url)) if url else start_cluster()
    try:
        with psycopg.connect(server.url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        server.stop()
        raise NoServer(f"cannot connect to the test server: {exc}") from exc
    return server


def require_server() -> Server:
    """:func:`acquire_server`, or skip the test (locally) / fail it (under CI, ``CI=true``) with the reason."""
    import pytest

    try:
        return acquire_server()
    except NoServer as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"PostgreSQL is required under CI: {exc}", pytrace=False)
        pytest.skip(f"no PostgreSQL server: {exc}")


_SHARED: list[Server] = []


def shared_server() -> Server:
    """One server for the whole test session (started on first use, stopped at exit); skips or fails as :func:`require_server`."""
    if not _SHARED:
        import atexit

        server = require_server()
        _SHARED.append(server)
        atexit.register(server.stop)
    return _SHARED[0]
