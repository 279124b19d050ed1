"""A PostgreSQL 16 + pgvector server for one store, started and stopped by recallbench.

The binaries are the ones the `pgserver` wheel ships (`pgserver/pginstall/bin`: initdb,
postgres, pg_dump, pg_restore, pgvector 0.6.2 in its `share/extension`); recallbench never
calls pgserver's Python lifecycle (as root, that creates a system user and opens every
directory above the data directory to everyone). Instead:

* `initdb -D <dir>/data -U postgres -A trust` once, then `postgres -D <dir>/data -k <socket
  dir> -c listen_addresses=''` in the foreground: a Unix socket only, no TCP port. The data
  directory and the server's log (`<dir>/server.log`) are in the store directory; the
  socket too (`<dir>/sock`) unless that path is too long for a Unix socket (107 bytes), then
  in a short temporary directory, removed when the server stops.
* PostgreSQL refuses to run as root. Both programs run under util-linux
  `unshare --user --map-user=U --map-group=G --pid --ipc --fork --kill-child`: a user
  namespace in which the caller is uid U (1000 when the caller is root, the caller's own uid
  otherwise), so no user is added to the system and what the server writes is owned by the
  caller outside; a pid namespace in which postgres is pid 1, so when it dies the kernel
  kills every backend; an IPC namespace, so no System V segment outlives it. Without a
  usable `unshare` a non-root caller runs postgres directly; root cannot (one line says so).
* Every exit path stops it. `stop()` (the store's `close`, reached on an exception, a
  Ctrl-C, SIGTERM and SIGHUP, which `recallbench.signals` turns into one) asks postmaster
  for a fast shutdown (SIGINT) and waits; a server that does not stop is killed. If the
  recallbench process (or its worker) is killed outright, even by SIGKILL, `unshare` gets
  SIGKILL from the kernel (PR_SET_PDEATHSIG, set before it runs) and `--kill-child` takes
  postgres with it.
* A server that does not start is one `RecallbenchError` line with its log's last line.

Clients (psycopg, pg_dump, pg_restore) run as the caller and connect through the socket
(`trust` authentication, the socket mode 0700: only the caller can connect).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from recallbench.errors import RecallbenchError
from recallbench.signals import die_with_parent, prepare_parent_death_signal

#: the database each store keeps its data in (one server per store)
DATABASE = "recallbench"
SUPERUSER = "postgres"
PORT = 5432
#: longest Unix socket path (sun_path is 108 bytes with the terminating NUL)
SOCKET_PATH_LIMIT = 107
SOCKET_FILE = f".s.PGSQL.{PORT}.lock"  # the longest name postgres puts in the socket dir
#: the uid (and gid) root runs postgres as, inside its user namespace
NAMESPACE_ID = 1000
#: seconds a server may take to start or stop: a bound for a loaded machine, not a measure
START_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
#: server settings given on its command line (everything else at PostgreSQL's defaults)
SERVER_SETTINGS = {
    "listen_addresses": "",
    "unix_socket_permissions": "0700",
    "max_connections": "20",
}


def install_dir() -> Path:
    """`pgserver/pginstall` of the installed pgserver wheel (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RecallbenchError(
            "PostgreSQL: the pgserver package is not installed: install the optional "
            "`postgres` extra (pip install -e '.[postgres]' or `make setup`)"
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (found / "bin" / "postgres").is_file():
        raise RecallbenchError(f"PostgreSQL: {found}/bin/postgres: missing from pgserver")
    return found


def program(name: str) -> str:
    """The path of one of pgserver's PostgreSQL programs."""
    return str(install_dir() / "bin" / name)


def versions() -> dict[str, str]:
    """The PostgreSQL server and pgvector versions of the binaries used."""
    out = subprocess.run(
        [program("postgres"), "--version"], capture_output=True, text=True, check=False
    )
    control = install_dir() / "share" / "postgresql" / "extension" / "vector.control"
    if not control.is_file():
        control = install_dir() / "share" / "extension" / "vector.control"
    pgvector = "unknown"
    with contextlib.suppress(OSError):
        for line in control.read_text().splitlines():
            if line.startswith("default_version"):
                pgvector = line.split("=", 1)[1].strip().strip("'")
    return {"postgresql": out.stdout.strip().rsplit(" ", 1)[-1], "pgvector": pgvector}


def _dies_with_this_process() -> functools.partial:
    """A `preexec_fn` for a child that must not outlive this process."""
    prepare_parent_death_signal()
    return functools.partial(die_with_parent, os.getpid())


def _namespace_ids() -> tuple[int, int]:
    if os.geteuid() == 0:
        return NAMESPACE_ID, NAMESPACE_ID
    return os.geteuid(), os.getegid()


def _unshare_prefix() -> list[str]:
    uid, gid = _namespace_ids()
    return [
        shutil.which("unshare") or "unshare",
        "--user",
        f"--map-user={uid}",
        f"--map-group={gid}",
        "--pid",
        "--ipc",
        "--fork",
        "--kill-child",
    ]


@functools.cache
def _namespaces_work() -> bool:
    """Whether `unshare` can make the namespaces here (tried once per process)."""
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(
            [*_unshare_prefix(), "true"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def server_command(argv: list[str]) -> list[str]:
    """`argv` (initdb or postgres) as it runs: inside the namespaces when `unshare` works,
    else directly for a non-root caller; root without namespaces is refused in one line."""
    if _namespaces_work():
        return [*_unshare_prefix(), *argv]
    if os.geteuid() == 0:
        raise RecallbenchError(
            "PostgreSQL will not run as root, and util-linux `unshare --user --pid` does not "
            "work here (user namespaces disabled?): run recallbench as a normal user"
        )
    return argv


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
    return "(its log is empty)"


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


class PostgresServer:
    """One PostgreSQL server over `<directory>/data` (see the module docstring).

    `start()` makes the data directory on first use and returns once the server accepts
    connections; `stop()` is idempotent. A context manager too."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory).resolve()
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.socket_dir: Path | None = None
        self._temporary_socket_dir = False
        self._proc: subprocess.Popen | None = None
        self._log_handle: Any = None

    # ------------------------------------------------------------------ life cycle

    def _run(self, argv: list[str], what: str) -> None:
        with open(self.log, "ab") as log:
            done = subprocess.run(
                server_command(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_dies_with_this_process(),
                check=False,
            )
        if done.returncode != 0:
            raise RecallbenchError(
                f"PostgreSQL {what} failed in {self.directory}: {_last_line(self.log)}"
            )

    def _choose_socket_dir(self) -> Path:
        inside = self.directory / "sock"
        if len(str(inside)) + 1 + len(SOCKET_FILE) <= SOCKET_PATH_LIMIT:
            inside.mkdir(exist_ok=True)
            return inside
        base = tempfile.gettempdir()
        if len(base) + 20 + len(SOCKET_FILE) > SOCKET_PATH_LIMIT:
            base = "/tmp"
        self._temporary_socket_dir = True
        return Path(tempfile.mkdtemp(prefix="rb-pg-", dir=base))

    def start(self) -> PostgresServer:
        """Start the server (initdb first when the data directory is new)."""
        if self._proc is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.data / "PG_VERSION").is_file():
            self._run(
                [program("initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
                 "-E", "UTF8", "--no-locale", "--no-sync"],
                "initdb",
            )  # fmt: skip
        self.socket_dir = self._choose_socket_dir()
        settings = [f"-c{key}={value}" for key, value in SERVER_SETTINGS.items()]
        argv = [program("postgres"), "-D", str(self.data), "-k", str(self.socket_dir),
                "-p", str(PORT), *settings]  # fmt: skip
        self._log_handle = open(self.log, "ab")  # noqa: SIM115 (open while the server runs)
        try:
            self._proc = subprocess.Popen(
                server_command(argv),
                stdin=subprocess.DEVNULL,
                stdout=self._log_handle,
                stderr=subprocess.STDOUT,
                preexec_fn=_dies_with_this_process(),
                start_new_session=True,  # a terminal's Ctrl-C reaches recallbench, which stops it
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        pid_file = self.data / "postmaster.pid"
        with contextlib.suppress(OSError):
            lines = pid_file.read_text().splitlines()
            return len(lines) >= 8 and lines[7].strip() == "ready"
        return False

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            if self._proc.poll() is not None:
                raise RecallbenchError(
                    f"PostgreSQL server in {self.directory} did not start: {_last_line(self.log)}"
                )
            if time.monotonic() > deadline:
                raise RecallbenchError(
                    f"PostgreSQL server in {self.directory} not ready after {START_TIMEOUT:.0f} "
                    f"s: {_last_line(self.log)}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """A fast shutdown (SIGINT to postmaster), the process killed if it does not end
        within `STOP_TIMEOUT`; the temporary socket directory removed. Idempotent."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.poll() is None:
                postmaster = self._postmaster_pid_of(proc)
                if postmaster is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(postmaster, signal.SIGINT)
                try:
                    proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()  # unshare: --kill-child takes postgres with it
                    proc.wait()
            elif proc is not None:
                proc.wait()
        finally:
            if self._log_handle is not None:
                self._log_handle.close()
                self._log_handle = None
            if self._temporary_socket_dir and self.socket_dir is not None:
                shutil.rmtree(self.socket_dir, ignore_errors=True)
                self._temporary_socket_dir = False

    def _postmaster_pid_of(self, proc: subprocess.Popen) -> int | None:
        if Path(proc.args[0]).name == "unshare":
            children = _children(proc.pid)
            return children[0] if children else None
        return proc.pid

    @property
    def pid(self) -> int | None:
        """The pid of the process recallbench started (unshare, or postgres itself)."""
        return None if self._proc is None else self._proc.pid

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ clients

    def conninfo(self, dbname: str = DATABASE) -> str:
        """A libpq connection string for `dbname` over the socket."""
        return f"host={self.socket_dir} port={PORT} dbname={dbname} user={SUPERUSER}"

    def sqlalchemy_url(self, driver: str, dbname: str = DATABASE) -> str:
        """A SQLAlchemy URL (`postgresql+<driver>`) for `dbname` over the socket."""
        return f"postgresql+{driver}://{SUPERUSER}@/{dbname}?host={self.socket_dir}&port={PORT}"

    def client_args(self, dbname: str = DATABASE) -> list[str]:
        return ["-h", str(self.socket_dir), "-p", str(PORT), "-U", SUPERUSER, "-d", dbname]

    def ensure_database(self, dbname: str = DATABASE) -> None:
        """`dbname` made (if new) with the pgvector extension in it."""
        import psycopg

        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
            if found.fetchone() is None:
                conn.execute(f'CREATE DATABASE "{dbname}"')
        with psycopg.connect(self.conninfo(dbname), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")

    def dump(self, target: Path, dbname: str = DATABASE) -> None:
        """`pg_dump --format=custom` of `dbname` into `target`."""
        self._client(["pg_dump", "--format=custom", "--no-owner", "-f", str(target)], dbname)

    def restore(self, dump: Path, dbname: str = DATABASE) -> None:
        """`pg_restore` of a `dump` into `dbname`, a new database (made here)."""
        import psycopg

        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        self._client(["pg_restore", "--no-owner", "--exit-on-error", str(dump)], dbname)

    def _client(self, argv: list[str], dbname: str) -> None:
        done = subprocess.run(
            [program(argv[0]), *argv[1:], *self.client_args(dbname)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RecallbenchError(f"PostgreSQL {argv[0]} failed in {self.directory}: {last}")
