"""The Ray engine: `RayExecutor`, ``workers`` Ray actors on a local Ray started for the run
or on the cluster at ``--ray-address`` (``--executor ray``; the contract:
`recallbench.engine.executor`). The address is waited for (TCP, then gRPC) within a bound,
the cluster's CPUs are checked before any actor starts, and every wait on Ray watches the
nodes, so a dead node or actor is one `WorkerDied` line. Ray is imported only when the
executor is entered: this module imports without it."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from recallbench.core.errors import RecallbenchError
from recallbench.engine.workerfault import WorkerDied, task_label

T = TypeVar("T")
R = TypeVar("R")

RAY_MISSING = "the ray executor needs the optional extra: pip install -e '.[ray]'"

#: how long a graceful shutdown waits for Ray actors to run their finalizers (seconds)
RAY_CLOSE_TIMEOUT = 60.0

#: how long `--ray-address` may take to accept a TCP connection before the run fails (seconds;
#: the environment variable RAY_ADDRESS_WAIT_VARIABLE sets another)
RAY_ADDRESS_WAIT = 30.0
RAY_ADDRESS_WAIT_VARIABLE = "RECALLBENCH_RAY_ADDRESS_WAIT"


def ray_address_wait() -> float:
    """Seconds `--ray-address` may take to answer: RECALLBENCH_RAY_ADDRESS_WAIT when set (a
    positive number), else RAY_ADDRESS_WAIT."""
    raw = os.environ.get(RAY_ADDRESS_WAIT_VARIABLE, "").strip()
    if not raw:
        return RAY_ADDRESS_WAIT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds <= 0:
        raise RecallbenchError(
            f"{RAY_ADDRESS_WAIT_VARIABLE}={raw!r}: expected a positive number of seconds"
        )
    return seconds


#: how long the Ray actors may take to be placed on a node and start (seconds); their
#: initializers then run for as long as they need, watched for dead nodes and actors
RAY_PLACE_TIMEOUT = 120.0

#: how often a wait on Ray checks the cluster's nodes (seconds)
RAY_WATCH_SECONDS = 2.0


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RecallbenchError(RAY_MISSING) from None
    return ray


def _ray_connect_failed(address: str, exc: BaseException) -> str:
    """One line for a ``ray.init(address=...)`` that could not connect: Ray's reason (the
    last line of the traceback it keeps as the cause) and, unless this process enabled it,
    the token authentication a cluster started by ``ray start --head`` usually requires."""
    message = f"cannot connect to the Ray cluster at {address}: {exc}"
    cause = str(exc.__cause__ or "").strip().splitlines()
    if cause:
        message += f": {cause[-1].strip()}"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        message += (
            " (a cluster with token authentication needs RAY_AUTH_MODE=token and its token"
            " in recallbench's environment too: see docs/executors.md)"
        )
    return message


#: the hosts Ray replaces by this machine's interface address (`local_ip`)
LOCALHOST = ("localhost", "127.0.0.1", "::1")


def wait_for_address(address: str, local_ip: str | None = None) -> None:
    """Wait until something accepts a TCP connection at `address` (``host:port``; other
    forms, such as ``auto``, are left to Ray), for at most `ray_address_wait()` seconds, else
    one line naming the address: Ray itself retries an address nobody answers forever.
    A LOCALHOST host is probed at `local_ip` when given, where Ray will connect."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    host = host.strip("[]")
    target = ""
    if host in LOCALHOST and local_ip:
        host, target = local_ip, f" (Ray connects to {local_ip}:{port} for it)"
    wait = ray_address_wait()
    deadline = time.monotonic() + wait
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                break
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            raise RecallbenchError(
                f"no Ray cluster answers at {address}{target}: nothing accepted a connection "
                f"there within {wait:g} s ({reason}); is `ray start --head` running "
                "there, on that port?"
            )
        time.sleep(1.0)
    wait_for_grpc(address, f"{host}:{port}", target, max(deadline - time.monotonic(), 5.0))


def wait_for_grpc(address: str, hostport: str, target: str, seconds: float) -> None:
    """Wait until the listener at `hostport` speaks gRPC (HTTP/2), as Ray's GCS and Ray
    Client servers do, for at most `seconds`, else one line naming `address`: a listener
    that is not a Ray server (a web server, another service) would otherwise keep Ray
    retrying for minutes."""
    import grpc

    channel = grpc.insecure_channel(hostport)
    try:
        grpc.channel_ready_future(channel).result(timeout=seconds)
    except grpc.FutureTimeoutError:
        raise RecallbenchError(
            f"no Ray cluster answers at {address}{target}: something accepts connections there "
            f"but did not answer as a gRPC server (Ray's GCS) within {seconds:.0f} s; is that "
            "the port `ray start --head` printed?"
        ) from None
    finally:
        channel.close()


def _node_name(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')} (node {str(node.get('NodeID', ''))[:12]})"


def check_ray_cluster(nodes: list[dict[str, Any]], workers: int, where: str = "") -> dict[str, str]:
    """The live nodes of `ray.nodes()` (node id -> name), or one line when their CPUs are
    fewer than `workers`, naming the nodes that are dead."""
    alive = {n["NodeID"]: _node_name(n) for n in nodes if n.get("Alive")}
    cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes if n.get("Alive"))
    if cpus < workers:
        dead = [_node_name(n) for n in nodes if not n.get("Alive")]
        raise RecallbenchError(
            f"the Ray cluster{where} has {cpus:g} CPUs on {len(alive)} live node(s), fewer than "
            f"--workers {workers}" + (f"; dead: {', '.join(dead)}" if dead else "")
        )
    return alive


def _dead_nodes_text(ray: Any, live: dict[str, str]) -> str:
    """``: node X died`` for the nodes of `live` that are no longer alive, else ''."""
    try:
        now = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    except Exception:  # the GCS itself is gone
        return ": the Ray cluster no longer answers"
    dead = [name for node_id, name in live.items() if node_id not in now]
    return f": node {', '.join(dead)} died" if dead else ""


def _as_raised(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """A SIGTERM's `Terminated` stays itself: Ray turns an exception raised by a signal
    handler during its calls (ray.wait, ray.get) into a plain KeyboardInterrupt."""
    from recallbench.core.signals import as_raised

    return as_raised(exc)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


class _RayWorker:
    """One Ray actor: the worker-local state of one worker (made a Ray actor class at run
    time, so this module imports without Ray)."""

    def __init__(
        self,
        initializer: Callable[..., Any] | None,
        initargs: tuple,
        finalizer: Callable[[], Any] | None,
    ) -> None:
        self._initializer: Callable[..., Any] | None = initializer
        self._initargs = initargs
        self._finalizer = finalizer
        self._error: BaseException | None = None

    def ping(self) -> str:
        """Placed and started: the id of the node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def ready(self) -> None:
        """Run the initializer (once); its exception is re-raised as is."""
        initializer, self._initializer = self._initializer, None
        if initializer is not None:
            try:
                initializer(*self._initargs)
            except Exception as exc:
                self._error = exc  # re-raised by every call, so the parent sees it as is
        if self._error is not None:
            raise self._error

    def run(self, fn: Callable[[T], R], item: T) -> R:
        if self._error is not None:
            raise self._error
        return fn(item)

    def close(self) -> None:
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None and self._error is None:
            finalizer()


def _ray_get(ray: Any, ref: Any, timeout: float | None = None) -> Any:
    """`ray.get`, with a task's exception re-raised as itself instead of a RayTaskError."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException) and not isinstance(cause, ray.exceptions.RayError):
            raise cause from None
        raise


class RayExecutor:
    """``workers`` Ray actors, fed in input order from a bounded window.

    Each actor runs one task at a time and gets the next item as soon as it is free (so a
    slow item does not hold up the other actors); results are yielded strictly in input
    order. Ray is initialised here only when it is not already; then it is also shut down
    here.
    """

    def __init__(
        self,
        workers: int,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        finalizer: Callable[[], Any] | None = None,
        *,
        ray_address: str | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self.workers = workers
        self.max_in_flight = max(max_in_flight or 2 * workers, 1)
        self.ray_address = ray_address or None
        self._initializer = initializer
        self._initargs = tuple(initargs)
        self._finalizer = finalizer
        self._ray: Any = None
        self._started_ray = False
        self._actors: list[Any] = []
        self._where = ""  # " at ADDRESS" when connected to a cluster
        self._live_nodes: dict[str, str] = {}  # node id -> its address, when the run began
        self._nodes: set[str] = set()  # the nodes our actors run on

    def _await_actors(self, method: str, timeout: float | None) -> list[Any]:
        """Call `method` on every actor and wait for all of them; their results in actor
        order. A dead actor, or a node that died meanwhile (any live node while `timeout` is
        set, the actors are being placed; else an actor's node), is one `WorkerDied` line,
        and so is a wait beyond `timeout` (None: no bound): never a hang, never a traceback."""
        ray = self._ray
        pending = {getattr(actor, method).remote(): n for n, actor in enumerate(self._actors)}
        results: list[Any] = [None] * len(self._actors)
        watched = self._live_nodes if timeout is not None else self._actor_nodes()
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=RAY_WATCH_SECONDS)
            for ref in ready:
                number = pending.pop(ref)
                try:
                    results[number] = _ray_get(ray, ref)
                except ray.exceptions.RayActorError as exc:
                    raise WorkerDied(
                        f"Ray actor {number + 1} of {len(self._actors)} died before it was "
                        f"ready ({type(exc).__name__}: {_first_line(exc)})"
                        f"{_dead_nodes_text(ray, self._live_nodes)}; nothing was run"
                    ) from None
            if not pending:
                break
            dead = _dead_nodes_text(ray, watched)
            if dead:
                raise WorkerDied(
                    f"{len(pending)} of {len(self._actors)} Ray actors not ready{dead}; "
                    "nothing was run"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise WorkerDied(
                    f"{len(pending)} of {len(self._actors)} Ray actors were not placed on a "
                    f"node of the Ray cluster{self._where} within {timeout:g} s (its free CPUs "
                    f"now: {ray.available_resources().get('CPU', 0):g}); nothing was run"
                )
        return results

    def _actor_nodes(self) -> dict[str, str]:
        """The nodes our actors run on (node id -> name)."""
        return {node: self._live_nodes.get(node, node[:12]) for node in self._nodes}

    def __enter__(self) -> RayExecutor:
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            connecting = (
                self.ray_address not in (None, "local")
                if self.ray_address
                else bool(os.environ.get("RAY_ADDRESS"))
            )
            options: dict[str, Any] = {
                "address": self.ray_address,
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if not connecting:
                options["num_cpus"] = self.workers
            address = self.ray_address or os.environ.get("RAY_ADDRESS", "")
            if connecting:
                wait_for_address(address, ray.util.get_node_ip_address())
            from recallbench.core.signals import Terminated, handlers_kept

            # ray.init installs its own SIGTERM handlers (and its core worker a C++ one):
            # ours (SIGTERM as `Terminated`) are put back as soon as it returns
            try:
                with handlers_kept():
                    ray.init(**options)
            except ConnectionError as exc:
                if not connecting:
                    raise
                raise RecallbenchError(_ray_connect_failed(address, exc)) from None
            except SystemExit as exc:
                # Ray's handler (`sys.exit(SIGTERM)`) ran: a SIGTERM during ray.init itself
                if exc.code == signal.SIGTERM:
                    with contextlib.suppress(Exception):
                        ray.shutdown()
                    raise Terminated() from None
                raise
            self._started_ray = True
            self._where = f" at {address}" if connecting else ""
        try:
            self._live_nodes = check_ray_cluster(ray.nodes(), self.workers, self._where)
            actor_class = ray.remote(num_cpus=1, max_restarts=0)(_RayWorker)
            self._actors = [
                actor_class.remote(self._initializer, self._initargs, self._finalizer)
                for _ in range(self.workers)
            ]
            self._nodes = set(self._await_actors("ping", RAY_PLACE_TIMEOUT))
            self._await_actors("ready", None)
        except KeyboardInterrupt as exc:
            self._shutdown(graceful=False)
            raise _as_raised(exc) from None
        except BaseException:
            self._shutdown(graceful=False)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._shutdown(graceful=exc_type is None or issubclass(exc_type, Exception))

    def _shutdown(self, graceful: bool) -> None:
        ray = self._ray
        if ray is None:
            return
        try:
            if graceful and self._actors:
                # a finalizer's failure must not hide the run's own outcome
                with contextlib.suppress(Exception):
                    ray.get(
                        [actor.close.remote() for actor in self._actors],
                        timeout=RAY_CLOSE_TIMEOUT,
                    )
            for actor in self._actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            self._actors = []
        finally:
            if self._started_ray:
                self._started_ray = False
                ray.shutdown()
            self._ray = None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        if self._ray is None or not self._actors:
            raise RuntimeError("use the executor as a context manager")
        ray = self._ray
        iterator = iter(items)
        # window: one slot per item taken and not yet yielded, in input order:
        # [item, ref]; ref is None until the item is handed to an actor
        window: deque[list[Any]] = deque()
        waiting: deque[list[Any]] = deque()  # slots not yet handed out, in input order
        idle: deque[Any] = deque(self._actors)
        running: dict[Any, Any] = {}  # ref -> its actor
        done: set[Any] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(window) < self.max_in_flight:
                    try:
                        item = next(iterator)
                    except StopIteration:
                        exhausted = True
                        break
                    slot = [item, None, task_label(fn, item)]
                    window.append(slot)
                    waiting.append(slot)
                while idle and waiting:
                    slot = waiting.popleft()
                    actor = idle.popleft()
                    ref = actor.run.remote(fn, slot[0])
                    slot[0], slot[1] = None, ref
                    running[ref] = actor
                if not window:
                    return
                head = window[0][1]
                if head is not None and head in done:
                    label = window.popleft()[2]
                    done.discard(head)
                    try:
                        result = _ray_get(ray, head)
                    except ray.exceptions.RayActorError as exc:  # ActorDiedError and kin
                        reason = (str(exc).strip().splitlines() or [""])[0]
                        raise WorkerDied(
                            f"a Ray actor died while running {label} "
                            f"({type(exc).__name__}: {reason[:200]}); the run is abandoned, "
                            "nothing written"
                        ) from None
                    yield result
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=RAY_WATCH_SECONDS)
                if not ready:
                    dead = _dead_nodes_text(ray, self._actor_nodes())
                    if dead:
                        label = next(slot[2] for slot in window if slot[1] in running)
                        raise WorkerDied(
                            f"a Ray actor's node died while running {label}{dead}; the run "
                            "is abandoned, nothing written"
                        )
                for ref in ready:
                    idle.append(running.pop(ref))
                    done.add(ref)
        except KeyboardInterrupt as exc:
            raise _as_raised(exc) from None
        finally:
            # Items not yet handed to an actor are simply dropped; the few running ones
            # (one per actor) finish. Nothing waits in an actor's queue, so nothing is
            # ray.cancel-led: with Ray 2.60, cancelling an actor task that had already
            # started held the actor's next task (our close) back for ~30 s.
            window.clear()
            waiting.clear()
