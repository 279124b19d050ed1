"""A PostgreSQL 16 + pgvector server for one store, started and stopped by recallbench.

The binaries are the ones the `pgserver` wheel ships (`pgserver/pginstall/bin`: initdb,
postgres, pg_dump, pg_restore, pgvector 0.6.2 in its `share/extension`); recallbench never
calls pgserver's Python lifecycle (as root, that creates a system user and opens every
directory above the data directory to everyone). Instead:

* `initdb -D <dir>/data -U postgres -A trust` once, then `postgres -D <dir>/data -k <socket
  dir> -c listen_addresses=''` in the foreground: a Unix socket only, no TCP port. The data
  directory and the server's log (`<dir>/server.log`) are in the store directory; the
  socket too (`<dir>/sock`) unless that path is too long for a Unix socket (107 bytes,
  counted in bytes: `adapters.fits_unix_socket`, Milvus's check too) or holds a comma
  (postgres's `-k` and libpq's `host` are comma-separated lists, with no escape), then in a
  temporary directory `rb-pg-*` in tempfile's directory (the user's TMPDIR; /tmp when that
  is too long), removed when the server stops. A data directory path with a newline or a
  carriage return (initdb refuses it) is refused in one line before anything starts.
* A command killed with SIGKILL leaves its server's `postmaster.pid` (saying "ready"):
  `start()` removes it when no `postgres -D <data>` process is alive (waiting for one that
  is still ending), so the readiness it then waits for is its own server's.
* PostgreSQL refuses to run as root. Both programs run under util-linux
  `unshare --user --map-user=U --map-group=G --pid --ipc --fork --kill-child`: a user
  namespace in which the caller is uid U (1000 when the caller is root, the caller's own uid
  otherwise), so no user is added to the system and what the server writes is owned by the
  caller outside; a pid namespace in which postgres is pid 1, so when it dies the kernel
  kills every backend; an IPC namespace, so no System V segment outlives it. Without a
  usable `unshare` a non-root caller runs postgres directly; root cannot (one line says so).
* Every exit path stops it. `stop()` (the store's `close`, reached on an exception, a
  Ctrl-C, SIGTERM and SIGHUP, which `recallbench.core.signals` turns into one) asks postmaster
  for a fast shutdown (SIGINT) and waits; a server that does not stop is killed. If the
  recallbench process (or its worker) is killed outright, even by SIGKILL, `unshare` gets
  SIGKILL from the kernel (PR_SET_PDEATHSIG, set before it runs) and `--kill-child` takes
  postgres with it. A temporary socket directory names its maker (pid and start time, in
  its `owner` file): one whose maker is gone (a worker killed with its server) is removed
  when a process that imported this module exits (the run's parent) or starts a server.
* A program that fails (initdb, postgres, pg_dump, pg_restore) is one `RecallbenchError`
  line with the cause its output gives (`cause_line`: its last PANIC or FATAL line, else
  ERROR, else `program: error:`, else its last line; for the server, what it logged since
  this start): "No space left on device", not "initdb: removing data directory".

Clients (psycopg, pg_dump, pg_restore) run as the caller and connect through the socket
(`trust` authentication, the socket mode 0700: only the caller can connect); connection
parameters are built structurally (psycopg's `make_conninfo`, SQLAlchemy's `URL.create`),
so a store path with a space, `&`, `+`, `%` or a quote stays one value.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from recallbench.core.errors import RecallbenchError
from recallbench.core.signals import die_with_parent, prepare_parent_death_signal
from recallbench.systems.adapters import fits_unix_socket

#: the database each store keeps its data in (one server per store)
DATABASE = "recallbench"
SUPERUSER = "postgres"
PORT = 5432
SOCKET_FILE = f".s.PGSQL.{PORT}.lock"  # the longest name postgres puts in the socket dir
#: characters a socket directory cannot hold: a comma separates the directories of
#: postgres's `unix_socket_directories` (`-k`) and the hosts of libpq's `host`, neither
#: with a way to escape it
SOCKET_DIR_UNSAFE = frozenset(",")
#: characters a data directory cannot hold: initdb refuses them ("shell command argument
#: contains a newline or carriage return"), and postmaster.pid keeps the path on one line
DATA_DIR_UNSAFE = frozenset("\n\r")
#: the prefix of a temporary socket directory (in tempfile's directory, else /tmp), and the
#: file in it that names the process that made it (pid and start time)
TEMP_SOCKET_PREFIX = "rb-pg-"
OWNER_FILE = "owner"
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


#: a line saying why a PostgreSQL program failed: the server's severities (`FATAL:  ...`
#: after its log prefix) or a client's and initdb's own (`initdb: error: ...`)
_SEVERE = (
    re.compile(r"\b(?:PANIC|FATAL):\s"),
    re.compile(r"\bERROR:\s"),
    re.compile(r"^[\w.-]+: error: "),
)


def severe_line(text: str) -> str | None:
    """The line of a PostgreSQL program's output that says why it failed: the last PANIC or
    FATAL line, else the last ERROR line, else the last `program: error:` line (from its
    severity on: the server's log prefix, time and pid, left out), whitespace runs collapsed
    to one space; None when there is none."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    for pattern in _SEVERE:
        for line in reversed(lines):
            found = pattern.search(line)
            if found:
                return line[found.start() :]
    return None


def cause_line(text: str) -> str:
    """`severe_line`, else the output's last line: "initdb: removing data directory" and
    "database system is shut down" are what follows a failure, not its cause."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return severe_line(text) or (lines[-1] if lines else "(its log is empty)")


def _log_since(path: Path, offset: int) -> str:
    """What a log file holds past `offset` (empty when it cannot be read)."""
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")
    return ""


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# --------------------------------------------------------------------------- processes


def _process_start(pid: int) -> int | None:
    """The start time of a live process (clock ticks since boot), None when it is gone or a
    zombie: with the pid, what tells a process from a later one that reuses its pid."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _postmasters_of(data: Path) -> list[int]:
    """The pids (as this process sees them) of live `postgres -D <data>` processes."""
    want = os.fsencode(data)
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if not argv[0].endswith(b"/postgres"):
            continue
        pairs = zip(argv, argv[1:], strict=False)
        serves = any(flag == b"-D" and value == want for flag, value in pairs)
        if serves and _process_start(int(entry.name)) is not None:
            found.append(int(entry.name))
    return found


def _make_temporary_socket_dir() -> Path:
    """A new `rb-pg-*` directory (mode 0700) in tempfile's directory, or in /tmp when that
    one's path is too long (or holds a comma) for a socket in it; its `owner` file names
    this process, so that `remove_abandoned_socket_dirs` can tell when it is abandoned."""
    base = tempfile.gettempdir()
    longest = os.path.join(base, TEMP_SOCKET_PREFIX + "x" * 8, SOCKET_FILE)
    if not fits_unix_socket(longest) or SOCKET_DIR_UNSAFE & set(base):
        base = "/tmp"
    made = Path(tempfile.mkdtemp(prefix=TEMP_SOCKET_PREFIX, dir=base))
    (made / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}\n")
    return made


def _abandoned(directory: Path) -> bool:
    """Whether a temporary socket directory's maker is gone (its server died with it)."""
    try:
        if directory.lstat().st_uid != os.geteuid():
            return False
        pid, start = (directory / OWNER_FILE).read_text().split()
    except (OSError, ValueError):
        return False  # not one of ours, or its owner file is not written yet
    return not pid.isdigit() or str(_process_start(int(pid))) != start


def remove_abandoned_socket_dirs() -> None:
    """Remove the temporary socket directories (`rb-pg-*` in tempfile's directory and in
    /tmp) whose maker has ended: a worker killed with its server (SIGTERM or SIGKILL to a
    run with workers: the parent removes them when it exits), or a command killed outright
    (the next one removes them). Run when a server starts and when a process exits."""
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                if entry.name.startswith(TEMP_SOCKET_PREFIX) and _abandoned(Path(entry.path)):
                    shutil.rmtree(entry.path, ignore_errors=True)


atexit.register(remove_abandoned_socket_dirs)


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
        self._log_start = 0

    # ------------------------------------------------------------------ life cycle

    def _run(self, argv: list[str], what: str) -> None:
        """Run `argv` to its end, its output kept in the log (and read from its pipe, so
        that a failure names its cause even when the log cannot be written: a full disk)."""
        done = subprocess.run(
            server_command(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_dies_with_this_process(),
            check=False,
        )
        with contextlib.suppress(OSError), open(self.log, "ab") as log:
            log.write(done.stdout)
        if done.returncode != 0:
            said = done.stdout.decode(errors="replace")
            raise RecallbenchError(
                f"PostgreSQL {what} failed in {self.directory}: {cause_line(said)}"
            )

    def _choose_socket_dir(self) -> Path:
        """`<dir>/sock` when a socket fits there (its path in bytes, no comma), else a
        temporary directory (`_make_temporary_socket_dir`), removed when the server stops."""
        inside = self.directory / "sock"
        if fits_unix_socket(inside / SOCKET_FILE) and not SOCKET_DIR_UNSAFE & set(str(inside)):
            inside.mkdir(exist_ok=True)
            return inside
        self._temporary_socket_dir = True
        return _make_temporary_socket_dir()

    def _check_paths(self) -> None:
        unsafe = sorted(DATA_DIR_UNSAFE & set(str(self.data)))
        if unsafe:
            raise RecallbenchError(
                f"PostgreSQL: {str(self.data)!r}: a data directory cannot hold "
                f"{' or '.join(map(repr, unsafe))} (initdb refuses it): use another build "
                "directory"
            )

    def _clear_stale_pid_file(self) -> None:
        """Remove the `postmaster.pid` of a server that is gone (a command killed with
        SIGKILL leaves it, saying "ready"); wait for one still ending (its command was just
        killed), and refuse in one line a server that does not end."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        running = _postmasters_of(self.data)
        while running and time.monotonic() < deadline:
            time.sleep(0.05)
            running = _postmasters_of(self.data)
        if running:
            raise RecallbenchError(
                f"PostgreSQL: a server (pid {running[0]}) still runs on {self.data} after "
                f"{STOP_TIMEOUT:.0f} s: stop it, then run the command again"
            )
        pid_file.unlink(missing_ok=True)

    def start(self) -> PostgresServer:
        """Start the server (initdb first when the data directory is new); return once it
        accepts connections."""
        if self._proc is not None:
            return self
        self._check_paths()
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_abandoned_socket_dirs()
        if not (self.data / "PG_VERSION").is_file():
            self._run(
                [program("initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
                 "-E", "UTF8", "--no-locale", "--no-sync"],
                "initdb",
            )  # fmt: skip
        self._clear_stale_pid_file()
        self.socket_dir = self._choose_socket_dir()
        settings = [f"-c{key}={value}" for key, value in SERVER_SETTINGS.items()]
        argv = [program("postgres"), "-D", str(self.data), "-k", str(self.socket_dir),
                "-p", str(PORT), *settings]  # fmt: skip
        self._log_start = _log_size(self.log)
        try:
            self._log_handle = open(self.log, "ab")  # noqa: SIM115 (open while the server runs)
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

    def log_since_start(self) -> str:
        """What the server logged since it was started (a client's statement that failed
        is logged there too: `ERROR:  ...`)."""
        return _log_since(self.log, self._log_start)

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
                    f"PostgreSQL server in {self.directory} did not start: "
                    f"{cause_line(self.log_since_start())}"
                )
            if time.monotonic() > deadline:
                raise RecallbenchError(
                    f"PostgreSQL server in {self.directory} not ready after {START_TIMEOUT:.0f} "
                    f"s: {cause_line(self.log_since_start())}"
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
        """A libpq connection string for `dbname` over the socket, each value quoted by
        psycopg (a path with a space, a quote or a backslash stays one value)."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host=str(self.socket_dir), port=PORT, dbname=dbname, user=SUPERUSER)

    def sqlalchemy_url(self, driver: str, dbname: str = DATABASE) -> str:
        """A SQLAlchemy URL (`postgresql+<driver>`) for `dbname` over the socket, built by
        SQLAlchemy (its query values percent-encoded: `&`, `+`, `%41` stay in the path)."""
        from sqlalchemy.engine import URL

        url = URL.create(
            f"postgresql+{driver}",
            username=SUPERUSER,
            database=dbname,
            query={"host": str(self.socket_dir), "port": str(PORT)},
        )
        return url.render_as_string(hide_password=False)

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
            said = cause_line(done.stderr) if done.stderr.strip() else "(no output)"
            raise RecallbenchError(f"PostgreSQL {argv[0]} failed in {self.directory}: {said}")
