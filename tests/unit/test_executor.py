"""The executor seam: every engine yields the same results in input order, bounds what it
takes from the input, carries a task's exception back as itself, keeps worker state per
worker, and leaves no worker behind when its parent is killed or interrupted.

The Ray tests run whenever this file runs (CI installs the `ray` extra); they share one
local Ray with 2 CPUs, started once for the module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import executor_tasks as tasks
import psutil
import pytest
from signalling import default_signals

from recallbench.core.errors import RecallbenchError
from recallbench.engine.executor import EXECUTORS, make_executor
from recallbench.engine.processes import ProcessExecutor
from recallbench.engine.ray_engine import RAY_MISSING, RayExecutor
from recallbench.engine.serial import SerialExecutor

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

#: (kind, workers) of the three engines: serial, 2 local processes, 2 Ray actors
ENGINES = [("local", 1), ("local", 2), ("ray", 2)]


def _import_ray() -> Any:
    """`ray`, or a clear failure: these tests are not skipped (CI installs the extra)."""
    try:
        import ray
    except ImportError:
        pytest.fail(
            "ray is not installed: the ray executor tests need `pip install -e '.[ray]'` "
            "(CI installs it)",
            pytrace=False,
        )
    return ray


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """One local Ray (2 CPUs) for the module; its workers can import `executor_tasks` and
    this checkout's `recallbench`."""
    ray = _import_ray()
    if ray.is_initialized():  # pragma: no cover - someone else's Ray
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        # this checkout's recallbench too, not whichever an installed one points at
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(TESTS), str(SRC)])}},
    )
    yield ray
    ray.shutdown()


# --------------------------------------------------------------------------- choosing


def test_make_executor_picks_the_engine() -> None:
    from recallbench.cli.options import EXECUTORS as CHOICES

    assert EXECUTORS == ("local", "ray") == CHOICES  # --executor's choices are the engines
    assert isinstance(make_executor(), SerialExecutor)
    assert isinstance(make_executor("local", 1), SerialExecutor)
    assert isinstance(make_executor("local", 2), ProcessExecutor)
    # prep's plan of one process with several threads: one worker, a process of its own
    own = make_executor("local", 1, own_process=True)
    assert isinstance(own, ProcessExecutor) and own.workers == 1
    assert make_executor("local", 3).max_in_flight == 6
    assert make_executor("local", 2, max_in_flight=5).max_in_flight == 5
    assert isinstance(make_executor("ray", 2), RayExecutor)  # Ray starts only on __enter__


def test_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(RecallbenchError, match="'dask'.*local, ray"):
        make_executor("dask", 2)


@pytest.mark.parametrize("workers", [0, -1])
def test_workers_must_be_positive(workers: int) -> None:
    with pytest.raises(RecallbenchError, match="workers"):
        make_executor("local", workers)


def test_ray_address_needs_the_ray_executor() -> None:
    with pytest.raises(RecallbenchError, match="--executor ray"):
        make_executor("local", 2, ray_address="10.0.0.1:6379")


def test_missing_ray_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RecallbenchError) as caught, make_executor("ray", 2):
        pass
    assert str(caught.value) == RAY_MISSING


# --------------------------------------------------------------------------- ordering


def test_every_engine_gives_the_same_ordered_results(ray_local: Any) -> None:
    expected = [tasks.digest(i) for i in range(40)]
    for kind, workers in ENGINES:
        with make_executor(kind, workers) as ex:
            assert list(ex.map(tasks.digest, range(40))) == expected, (kind, workers)
            # the same workers serve further maps
            assert list(ex.map(tasks.square, iter(range(7)))) == [i * i for i in range(7)]
            assert list(ex.map(tasks.square, [])) == []


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_forked_and_spawned_workers_give_the_same_results(method: str) -> None:
    """Both ways a local worker starts: same ordered results, per-worker initializer state."""
    expected = [tasks.digest(i) for i in range(40)]
    with ProcessExecutor(2, start_method=method) as ex:
        assert list(ex.map(tasks.digest, range(40))) == expected
        assert len({r["pid"] for r in ex.map(tasks.whoami, range(40))}) <= 2


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_ends_after_its_finalizers_without_the_teardown(
    method: str, tmp_path: Path
) -> None:
    """A worker's finalizer runs at the pool's shutdown on both start methods; a spawned one
    also runs its own `atexit` handlers (a forked one never does: they are its parent's)
    and, like a forked one, skips the interpreter's teardown (`_end_spawned_worker`)."""
    with ProcessExecutor(
        2,
        tasks.mark_exit,
        (str(tmp_path),),
        tasks.forget,
        start_method=method,
    ) as ex:
        pids = {r["pid"] for r in ex.map(tasks.whoami, range(8))}
    marks = sorted(p.name for p in tmp_path.iterdir())
    for pid in pids:
        assert f"fin-{pid}" in marks, marks
        assert (f"atexit-{pid}" in marks) == (method == "spawn"), marks
        assert (tmp_path / f"teardown-{pid}").read_bytes() == b"", marks


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is chosen on Linux only")
def test_workers_fork_only_from_a_single_threaded_parent() -> None:
    """`start_method`: fork when the process runs one thread (native threads counted), spawn
    as soon as another thread runs (a fork would copy any lock that thread holds)."""
    code = (
        "import threading, time\n"
        "from recallbench.engine.processes import start_method\n"
        "print(start_method())\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print(start_method())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["fork", "spawn"]


@pytest.mark.parametrize(
    ("kind", "workers", "max_in_flight", "expected"),
    [("local", 1, None, 1), ("local", 2, None, 4), ("local", 2, 3, 3), ("ray", 2, 3, 3)],
)
def test_input_is_taken_lazily_with_a_bounded_window(
    kind: str, workers: int, max_in_flight: int | None, expected: int, request: Any
) -> None:
    if kind == "ray":
        request.getfixturevalue("ray_local")
    pulled: list[int] = []

    def items() -> Iterator[int]:
        for i in range(50):
            pulled.append(i)
            yield i

    taken_at_yield: list[int] = []
    with make_executor(kind, workers, max_in_flight=max_in_flight) as ex:
        for result in ex.map(tasks.square, items()):
            taken_at_yield.append(len(pulled))
            assert result == (len(taken_at_yield) - 1) ** 2
    assert taken_at_yield[0] == expected  # taken before the first result came back
    # never more than the window ahead of what has been yielded
    assert all(taken - yielded <= expected for yielded, taken in enumerate(taken_at_yield, 1))
    assert len(taken_at_yield) == 50


# --------------------------------------------------------------------------- errors


def test_a_task_error_comes_back_as_itself(ray_local: Any, tmp_path: Path) -> None:
    for kind, workers in ENGINES:
        done = tmp_path / f"{kind}-{workers}"
        done.mkdir()
        items = [(i, 4, str(done)) for i in range(100)]
        with (
            pytest.raises(tasks.Boom) as caught,
            make_executor(kind, workers, max_in_flight=4) as ex,
        ):
            for _ in ex.map(tasks.fail_at, items):
                pass
        assert type(caught.value) is tasks.Boom, kind
        assert isinstance(caught.value, RecallbenchError)
        assert str(caught.value) == "item 4 is bad"  # one line, no remote traceback
        # the items after the failure were cancelled, not run
        assert len(list(done.iterdir())) < 20, (kind, workers)

        with pytest.raises(ValueError, match=r"^no good: 3$"), make_executor(kind, workers) as ex:
            list(ex.map(tasks.value_error_at, range(10)))


def test_an_initializer_error_comes_back_as_itself(ray_local: Any) -> None:
    for kind, workers in ENGINES:
        with (
            pytest.raises(tasks.Boom, match=r"^no system$"),
            make_executor(kind, workers, tasks.fail_initializer, ("no system",)) as ex,
        ):
            list(ex.map(tasks.square, range(5)))


# --------------------------------------------------------------------------- worker state


def test_initializer_state_is_per_worker(ray_local: Any, tmp_path: Path) -> None:
    for kind, workers in ENGINES:
        token = uuid.uuid4().hex
        marks = tmp_path / f"{kind}-{workers}"
        marks.mkdir()
        with make_executor(kind, workers, tasks.remember, (token, str(marks)), tasks.forget) as ex:
            results = list(ex.map(tasks.whoami, range(30)))
        assert [r["item"] for r in results] == list(range(30))
        for r in results:
            assert r["token"] == token  # the initializer ran in the worker that ran the task
            assert r["state_pid"] == r["pid"]
            assert r["inits"] == 1  # once per worker, not once per task
        pids = {r["pid"] for r in results}
        assert len(pids) <= workers
        if kind == "local" and workers == 1:
            assert pids == {os.getpid()}
        else:
            assert os.getpid() not in pids
        inits = {p.name.removeprefix("init-") for p in marks.glob("init-*")}
        finals = {p.name.removeprefix("fin-") for p in marks.glob("fin-*")}
        assert {str(pid) for pid in pids} <= inits
        assert finals == inits, (kind, workers)  # every worker ran the finalizer, once
        assert all((marks / f"fin-{pid}").read_text() == "1" for pid in finals)


# --------------------------------------------------------------------------- ray specifics

#: a task longer than any test: an interrupted executor must not wait for it
TASK_SECONDS = 600.0


def test_ray_leaves_a_ray_it_did_not_start_running(ray_local: Any) -> None:
    with make_executor("ray", 2) as ex:
        assert list(ex.map(tasks.square, range(5))) == [0, 1, 4, 9, 16]
    assert ray_local.is_initialized()
    assert _free_cpus(ray_local) == 2  # our actors are gone


def test_ray_interrupt_kills_the_actors_and_reraises(ray_local: Any) -> None:
    def items() -> Iterator[float]:
        yield from [TASK_SECONDS] * 3
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), make_executor("ray", 2) as ex:
        list(ex.map(tasks.sleep_for, items()))
    assert time.monotonic() - started < TASK_SECONDS / 2  # did not wait for the tasks
    assert ray_local.is_initialized()
    assert _free_cpus(ray_local) == 2


def test_ray_starts_and_stops_its_own_local_ray(tmp_path: Path) -> None:
    """Without a running Ray the executor starts one with `workers` CPUs and shuts it down."""
    _import_ray()
    script = textwrap.dedent(
        """
        import ray
        import executor_tasks as tasks
        from recallbench.engine.executor import make_executor

        with make_executor("ray", 2) as ex:
            cpus = ray.cluster_resources()["CPU"]
            results = list(ex.map(tasks.square, range(6)))
        print(cpus, results, ray.is_initialized())
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(SRC)])}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "2.0 [0, 1, 4, 9, 16, 25] False"


def _free_cpus(ray: Any, timeout: float = 120.0) -> float:
    """Available CPUs once killed actors have released theirs."""
    deadline = time.monotonic() + timeout
    while True:
        cpus = ray.available_resources().get("CPU", 0)
        if cpus >= 2 or time.monotonic() > deadline:
            return cpus
        time.sleep(0.1)


# --------------------------------------------------------------------------- local processes

#: seconds a worker takes to start, or to go once its parent is gone: about 1 s idle; the
#: bound holds on a machine at load 15 (the waits poll, so they cost only what it takes)
START_TIMEOUT = 300.0


PARENT = textwrap.dedent(
    """
    import sys
    import executor_tasks as tasks
    from recallbench.engine.executor import make_executor

    if __name__ == "__main__":
        with make_executor("local", 2, tasks.remember, ("orphans", sys.argv[1])) as ex:
            for result in ex.map(tasks.sleep_marked, [600.0] * 8):
                print(result, flush=True)
    """
)


def _start_parent(marks: Path, **popen: Any) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A parent running make_executor("local", 2) over 600 s tasks; its descendants once
    both workers are inside their first task (the workers and the multiprocessing resource
    tracker)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(SRC)])}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(marks)],
        env=env,
        cwd=marks,
        preexec_fn=default_signals,
        **popen,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while len(list(marks.glob("task-*"))) < 2:
        assert parent.poll() is None, "the parent died on its own"
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    children = psutil.Process(parent.pid).children(recursive=True)
    worker_pids = {int(p.name.removeprefix("init-")) for p in marks.glob("init-*")}
    assert worker_pids <= {c.pid for c in children}
    return parent, children


def _still_alive(processes: list[psutil.Process], within: float) -> list[psutil.Process]:
    """Those of `processes` still running (zombies count as gone) after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        alive = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _kill_leftovers(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    parent, children = _start_parent(tmp_path)
    assert len(children) >= 2
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=START_TIMEOUT)
        alive = _still_alive(children, within=START_TIMEOUT)
        assert alive == [], [(p.pid, p.cmdline()) for p in alive]
    finally:
        _kill_leftovers(children)


def test_ctrl_c_stops_the_pool_and_reraises(tmp_path: Path) -> None:
    # a terminal's Ctrl-C: SIGINT to the whole foreground process group
    parent, children = _start_parent(
        tmp_path, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    try:
        started = time.monotonic()
        os.killpg(parent.pid, signal.SIGINT)
        _, stderr = parent.communicate(timeout=START_TIMEOUT)
        assert time.monotonic() - started < START_TIMEOUT  # did not wait for the 600 s tasks
        assert parent.returncode != 0
        assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
        assert stderr.count("Traceback") == 1, stderr  # the parent's only, none from workers
        alive = _still_alive(children, within=START_TIMEOUT)
        assert alive == [], [(p.pid, p.cmdline()) for p in alive]
    finally:
        _kill_leftovers(children)


@pytest.mark.parametrize(("kind", "workers"), [("local", 2), ("ray", 2)])
def test_a_killed_worker_is_one_line_naming_its_task(
    request: pytest.FixtureRequest, kind: str, workers: int
) -> None:
    """A ~53-line BrokenProcessPool traceback (local) or a ~68-line ActorDiedError (Ray)
    before: now a `WorkerDied` naming the task the worker was running."""
    from recallbench.engine.workerfault import WorkerDied

    if kind == "ray":
        request.getfixturevalue("ray_local")
    items = [{"index": i, "bad": 5} for i in range(12)]
    with pytest.raises(WorkerDied) as caught, make_executor(kind, workers) as ex:
        list(ex.map(tasks.die_at, items))
    message = str(caught.value)
    assert "\n" not in message
    assert "die_at of scope #5" in message, message
    if kind == "local":
        assert "was killed by SIGKILL while running die_at of scope #5" in message
    else:
        assert message.startswith("a Ray actor died while running die_at of scope #5")


# --------------------------------------------------------------------------- ray: faults


def test_an_actor_dying_before_it_is_ready_is_one_line(ray_local: Any) -> None:
    """The actors' readiness check let a 68-line ActorDiedError traceback through."""
    from recallbench.engine.workerfault import WorkerDied

    with pytest.raises(WorkerDied) as caught, make_executor("ray", 2, os._exit, (1,)):
        pass
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("Ray actor ") and "died before it was ready" in message, message
    assert message.endswith("nothing was run")
    assert _free_cpus(ray_local) == 2  # the other actor is gone too


def _node(ip: str, alive: bool, cpus: float = 1.0) -> dict[str, Any]:
    return {
        "NodeID": f"{ip.replace('.', '')}abcdef0123456789",
        "NodeManagerAddress": ip,
        "Alive": alive,
        "Resources": {"CPU": cpus} if alive else {},
    }


def test_the_cluster_check_counts_live_nodes_and_names_the_dead() -> None:
    from recallbench.engine.ray_engine import check_ray_cluster

    nodes = [_node("127.0.0.2", True), _node("127.0.0.3", False)]
    live = check_ray_cluster(nodes, 1, " at 127.0.0.2:6379")
    assert list(live.values()) == ["127.0.0.2 (node 127002abcdef)"]
    with pytest.raises(RecallbenchError) as caught:
        check_ray_cluster(nodes, 2, " at 127.0.0.2:6379")
    assert str(caught.value) == (
        "the Ray cluster at 127.0.0.2:6379 has 1 CPUs on 1 live node(s), fewer than --workers 2"
        "; dead: 127.0.0.3 (node 127003abcdef)"
    )
    with pytest.raises(RecallbenchError, match="has 0 CPUs on 0 live node"):
        check_ray_cluster([_node("127.0.0.3", False)], 1)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_address_nobody_answers_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray retried an address with no server forever; the wait is now bounded (30 s,
    shortened here: the bound is not what this test measures)."""
    import socket

    from recallbench.engine import ray_engine

    monkeypatch.setattr(ray_engine, "RAY_ADDRESS_WAIT", 0.0)
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(RecallbenchError) as caught:
        ray_engine.wait_for_address(address)
    assert str(caught.value).startswith(
        f"no Ray cluster answers at {address}: nothing accepted a connection there within 0 s ("
    )
    # Ray connects to this machine's interface address for a loopback host: probed there
    with socket.socket() as loopback_only:
        loopback_only.bind(("127.0.0.1", 0))
        loopback_only.listen()
        port = loopback_only.getsockname()[1]
        with pytest.raises(RecallbenchError) as caught:
            ray_engine.wait_for_address(f"localhost:{port}", "127.0.0.9")
        assert str(caught.value).startswith(
            f"no Ray cluster answers at localhost:{port} (Ray connects to 127.0.0.9:{port} "
            "for it): nothing accepted"
        )
    ray_engine.wait_for_address("auto")  # not host:port: left to Ray
    ray_engine.wait_for_address("")


def test_the_address_wait_is_set_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """RECALLBENCH_RAY_ADDRESS_WAIT sets the bound (seconds); a value that is not a positive
    number is one line naming the variable."""
    from recallbench.engine import ray_engine

    monkeypatch.delenv("RECALLBENCH_RAY_ADDRESS_WAIT", raising=False)
    assert ray_engine.ray_address_wait() == ray_engine.RAY_ADDRESS_WAIT == 30.0
    monkeypatch.setenv("RECALLBENCH_RAY_ADDRESS_WAIT", "0.5")
    assert ray_engine.ray_address_wait() == 0.5
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(RecallbenchError, match="within 0.5 s"):
        ray_engine.wait_for_address(address)
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("RECALLBENCH_RAY_ADDRESS_WAIT", bad)
        with pytest.raises(RecallbenchError) as caught:
            ray_engine.ray_address_wait()
        assert str(caught.value) == (
            f"RECALLBENCH_RAY_ADDRESS_WAIT={bad!r}: expected a positive number of seconds"
        )


def test_an_address_that_answers_grpc_is_not_waited_for() -> None:
    """A gRPC server (what Ray's GCS and Ray Client are) passes the probe at once."""
    from concurrent import futures

    import grpc

    from recallbench.engine import ray_engine

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        ray_engine.wait_for_address(f"127.0.0.1:{port}")
        ray_engine.wait_for_address(f"ray://127.0.0.1:{port}")
    finally:
        server.stop(None)


def test_a_listener_that_is_not_a_ray_server_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Something listens but does not speak gRPC (a web server): one line within the bound,
    where Ray would retry for minutes (the bound is shortened here: not what is measured)."""
    import http.server
    import threading

    from recallbench.engine import ray_engine

    monkeypatch.setattr(ray_engine, "RAY_ADDRESS_WAIT", 0.0)
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{web.server_address[1]}"
    try:
        with pytest.raises(RecallbenchError) as caught:
            ray_engine.wait_for_address(address)
    finally:
        web.shutdown()
        web.server_close()
    assert str(caught.value).startswith(
        f"no Ray cluster answers at {address}: something accepts connections there but did "
        "not answer as a gRPC server"
    )
    assert "\n" not in str(caught.value)


def test_handlers_kept_puts_our_handlers_back() -> None:
    """ray.init replaces the SIGTERM handler: whatever a block installs, ours come back."""
    from recallbench.core.signals import _raise_terminated, as_raised, handle_sigterm, handlers_kept

    before = signal.getsignal(signal.SIGTERM)
    before_int = signal.getsignal(signal.SIGINT)
    try:
        handle_sigterm()
        # Python's own Ctrl-C handler before the block (whatever an earlier test in this
        # process left), so that its return is what is checked
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with handlers_kept():
            signal.signal(signal.SIGTERM, lambda *_: None)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGTERM) is _raise_terminated
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        plain = KeyboardInterrupt()
        assert as_raised(plain) is plain  # no SIGTERM arrived: a Ctrl-C stays a Ctrl-C
    finally:
        signal.signal(signal.SIGTERM, before)
        if before_int is not None:
            signal.signal(signal.SIGINT, before_int)


def test_a_forked_worker_leaves_its_parents_files_alone(tmp_path: Path) -> None:
    """A forked worker closes, at its exit, only the files it opened (issue 38 item 6's close
    pass): the parent's are the parent's. Closing them there flushed the parent's buffer a
    second time (its data written twice) and could wait forever on a lock another of the
    parent's threads held at the fork (the suite hung on that once)."""
    log = tmp_path / "parent.log"
    with open(log, "w") as parents:
        parents.write("written once\n")  # buffered, not yet flushed, at the fork
        with ProcessExecutor(2, start_method="fork") as ex:
            assert list(ex.map(tasks.square, range(4))) == [0, 1, 4, 9]
        assert not parents.closed
    assert log.read_text() == "written once\n"
