"""A real two-node Ray cluster on this machine's loopback addresses, for tests.

`start(root)` runs `ray start --head --block` and a second `ray start --address --block`,
each as its own process group (and session) with its own `--temp-dir` under `root`, one CPU
each, no dashboard, and Ray's token authentication on (`RAY_AUTH_MODE=token`, the token in
a file under `root` named by `RAY_AUTH_TOKEN_PATH`; nothing is written to `~/.ray`). The
nodes take the loopback addresses 127.0.0.2 (head) and 127.0.0.3 (worker): Ray 2.60 replaces
127.0.0.1 and `localhost` by the machine's interface address wherever it is given (`ray start
--node-ip-address`, `--address`, `ray.init(address=...)`), but takes any other 127.x address
as it is. `stop(cluster)` ends both process groups (SIGTERM, then SIGKILL after a bounded
wait) and returns what is still running; `kill_node(cluster, 1)` kills the worker node
outright (SIGKILL to every process of its session), for the dead-node tests.

Run as a script, it is the probe the tests use (a separate process, so that the pytest
process never connects to the cluster): `python raycluster.py nodes ADDRESS` waits until the
two nodes are alive and prints them as JSON, `python raycluster.py state ADDRESS` prints
every node the cluster knows with whether it is alive, `python raycluster.py actors ADDRESS` prints
recallbench's worker actors (`recallbench.engine.ray_engine._RayWorker`) with their node and
driver pid.
They read Ray's GCS directly (`ray._private.state`): Ray's public state API
(`ray.util.state`) needs the dashboard, which the cluster does not run.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HEAD_IP = "127.0.0.2"
WORKER_IP = "127.0.0.3"
#: Bounds, not measures: the waits poll and end as soon as the thing happened (a node starts
#: in about 10 s on an idle 2-core machine); each holds on such a machine at load 15.
#: seconds for the head to write its address, and for both nodes to be alive
START_TIMEOUT = 600.0
#: seconds for a node's process group to exit after SIGTERM (then SIGKILL)
STOP_TIMEOUT = 60.0
#: seconds for one probe process
PROBE_TIMEOUT = 300.0
#: Ray's unix socket paths (TEMP/session_<date>_<pid>/sockets/plasma_store) must stay under
#: the kernel's 107 characters: a node's temp dir may take at most this many
MAX_TEMP_DIR = 40
#: 100 MB per node instead of Ray's 30% of RAM (the tests move kilobytes)
OBJECT_STORE_BYTES = 100 * 1024 * 1024


def ray_environment(token_file: Path) -> dict[str, str]:
    """This process's environment without any RAY_* setting, plus the cluster's: token
    authentication with the token file, no usage statistics, no 30 s drain on SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN_PATH=str(token_file),
        RAY_USAGE_STATS_ENABLED="0",
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",
    )
    return env


@dataclass
class RayCluster:
    root: Path
    env: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    address: str = ""
    #: node id -> node IP, once both nodes are alive
    nodes: dict[str, str] = field(default_factory=dict)

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it (pytest) dies,
    so a killed test run does not leave a cluster behind (`ray start --block` stops its
    node on SIGTERM). Linux only; elsewhere the fixture's teardown is all there is."""
    libc_name = ctypes.util.find_library("c")
    if sys.platform.startswith("linux") and libc_name:
        ctypes.CDLL(libc_name, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _ray_start(cluster: RayCluster, name: str, *args: str) -> subprocess.Popen:
    ray = Path(sys.executable).with_name("ray")
    temp_dir = cluster.root / name
    command = [
        str(ray),
        "start",
        "--block",
        *args,
        "--num-cpus",
        "1",
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--temp-dir",
        str(temp_dir),
        "--disable-usage-stats",
    ]
    with open(cluster.root / f"{name}.log", "wb") as log:
        process = subprocess.Popen(
            command,
            env=cluster.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped by its pid
            preexec_fn=_die_with_parent,
        )
    cluster.processes.append(process)
    return process


def _wait_for_file(path: Path, process: subprocess.Popen, cluster: RayCluster) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if process.poll() is not None:
            raise RuntimeError(
                f"ray start --head exited ({process.returncode}):\n{cluster.log('head')}"
            )
        time.sleep(0.2)
    raise RuntimeError(f"no {path} after {START_TIMEOUT:g} s:\n{cluster.log('head')}")


def start(root: Path) -> RayCluster:
    """Start the two nodes under `root` and wait until both are alive. On any failure the
    nodes already started are stopped before the error propagates."""
    if len(str(root / "h")) > MAX_TEMP_DIR:
        raise ValueError(f"{root}: too long for Ray's socket paths (at most {MAX_TEMP_DIR - 2})")
    root.mkdir(parents=True, exist_ok=True)
    token_file = root / "token"
    token_file.touch(mode=0o600)
    token_file.write_text(secrets.token_hex(32))  # what `ray get-auth-token --generate` makes
    cluster = RayCluster(root, ray_environment(token_file))
    try:
        head = _ray_start(
            cluster,
            "h",
            "--head",
            "--node-ip-address",
            HEAD_IP,
            "--port",
            "0",
            "--include-dashboard",
            "false",
        )
        # the head writes its GCS address (HEAD_IP:port) here once it is up
        cluster.address = _wait_for_file(root / "h" / "ray_current_cluster", head, cluster)
        _ray_start(cluster, "w", "--address", cluster.address, "--node-ip-address", WORKER_IP)
        nodes = probe(cluster, "nodes")
        cluster.nodes = {node["node_id"]: node["ip"] for node in nodes}
    except BaseException:
        stop(cluster)
        raise
    return cluster


def probe(cluster: RayCluster, what: str) -> list[dict]:
    """Run this file as a script against the cluster (see the module docstring)."""
    for process in cluster.processes:
        if process.poll() is not None:
            raise RuntimeError(
                f"{' '.join(process.args[:3])} exited ({process.returncode}):\n"
                f"{cluster.log('h')}\n{cluster.log('w')}"
            )
    done = subprocess.run(
        [sys.executable, __file__, what, cluster.address],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"probe {what} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def _sessions(process_ids: set[int]) -> list[str]:
    """The processes still running in the sessions led by `process_ids` (ray start runs
    every node process, actors included, in its own session)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) in process_ids:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                left.append(f"{entry.name}: {cmdline[:200]}")
        except (OSError, ProcessLookupError):
            continue
    return left


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def kill_node(cluster: RayCluster, index: int) -> None:
    """SIGKILL every process of node `index` (0 the head, 1 the worker): a node that dies
    without a word, as a machine that loses power. Its `ray start` is reaped."""
    process = cluster.processes[index]
    for line in _sessions({process.pid}):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=STOP_TIMEOUT)
    cluster.processes.remove(process)  # gone: `probe` and `stop` see the other nodes only


def stop(cluster: RayCluster) -> list[str]:
    """Stop the worker node, then the head: SIGTERM to each process group, SIGKILL what is
    left after STOP_TIMEOUT. Returns the processes of either session still running (none
    expected)."""
    pids = {process.pid for process in cluster.processes}
    for process in reversed(cluster.processes):
        _signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _sessions(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _sessions(pids):
        for process in cluster.processes:
            _signal_group(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _sessions(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
    for process in cluster.processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_TIMEOUT)
    cluster.processes = []
    return _sessions(pids)


# ----------------------------------------------------------------- the probe (a script)


def _connect(address: str):  # noqa: ANN202 - ray is imported here only
    import ray

    ray.init(address=address, log_to_driver=False, configure_logging=False)
    return ray


def _nodes(address: str) -> list[dict]:
    ray = _connect(address)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")]
        if len(alive) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return [{"node_id": n["NodeID"], "ip": n["NodeManagerAddress"]} for n in alive]


def _state(address: str) -> list[dict]:
    """Every node the GCS knows, alive or dead, at once (no waiting)."""
    ray = _connect(address)
    return [
        {"node_id": n["NodeID"], "ip": n["NodeManagerAddress"], "alive": bool(n["Alive"])}
        for n in ray.nodes()
    ]


def _actors(address: str) -> list[dict]:
    _connect(address)
    from ray._private import state

    drivers = {job["JobID"]: job.get("DriverPid") for job in state.jobs()}
    return [
        {
            "actor_id": actor_id,
            "node_id": actor["Address"]["NodeID"],
            "pid": actor["Pid"],
            "driver_pid": int(drivers.get(actor["JobID"]) or 0),
        }
        for actor_id, actor in state.actors().items()
        if actor["ActorClassName"] == "_RayWorker"
    ]


if __name__ == "__main__":
    what, address = sys.argv[1:3]
    print(json.dumps({"nodes": _nodes, "state": _state, "actors": _actors}[what](address)))
