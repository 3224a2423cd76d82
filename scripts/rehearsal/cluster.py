"""A Spark standalone cluster on 127.0.0.1 for the rehearsal: one master and two workers of the EMR venv's pyspark,
each in its own folder, so that executors run in JVMs and Python workers of their own, as on EMR; stopped when done,
whatever happens."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from scripts.rehearsal.steps import RehearsalError

WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_SIZE = {"spark.executor.cores": str(WORKER_CORES), "spark.executor.memory": "768m"}
"""The deployment's executor size (several cores and gigabytes, an EMR worker's) made to fit one worker: each
worker runs one executor, so a job gets two."""
REGISTER_TIMEOUT = 120.0
"""Seconds the master and both workers get to start and register (a few on a quiet machine)."""
STOP_TIMEOUT = 15.0
"""Seconds a daemon's process group gets to end on SIGTERM before it is killed."""


@dataclass(frozen=True)
class Daemon:
    """One daemon of the cluster: its name, the command line that starts it, its folder and log."""

    name: str
    command: list[str]
    folder: Path

    @property
    def log(self) -> Path:
        """Its standard output and error."""
        return self.folder / f"{self.name}.log"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports of 127.0.0.1 that nothing listens on now (the OS's choice, all bound at once)."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def daemons(venv: Path, root: Path, ports: Mapping[str, int]) -> list[Daemon]:
    """The master and workers' command lines (the venv's `spark-class`, pyspark's), each daemon in its own folder
    under `root`; `ports` holds `master`, `master-ui` and `worker-<n>-ui` (n from 1)."""
    spark_class, deploy = str(venv / "bin" / "spark-class"), "org.apache.spark.deploy"
    master = [f"{deploy}.master.Master", "--host", "127.0.0.1", "--port", str(ports["master"])]
    found = [Daemon("master", [spark_class, *master, "--webui-port", str(ports["master-ui"])], root / "master")]
    for n in range(1, WORKERS + 1):
        name, folder = f"worker-{n}", root / f"worker-{n}"
        worker = [f"{deploy}.worker.Worker", f"spark://127.0.0.1:{ports['master']}", "--host", "127.0.0.1"]
        size = ["--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--work-dir", str(folder / "work")]
        found.append(Daemon(name, [spark_class, *worker, *size, "--webui-port", str(ports[f"{name}-ui"])], folder))
    return found


def daemon_environment(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """A daemon's environment: `env` (a clean one, no AWS settings: executors get theirs from the job, as from an
    instance role), loopback only, its logs and scratch (a worker's executors' too: the files Spark ships them) in
    its own folder."""
    own = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(folder), "SPARK_LOCAL_DIRS": str(folder / "local")}
    return {**env, **own, "SPARK_WORKER_DIR": str(folder / "work")}


@contextmanager
def running(daemon: Daemon, env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`daemon` started in a process group of its own; on exit the group gets SIGTERM, then SIGKILL after
    STOP_TIMEOUT seconds, so that no JVM it started is left."""
    (daemon.folder / "work").mkdir(parents=True, exist_ok=True)
    with daemon.log.open("ab") as log:
        process = subprocess.Popen(daemon.command, env=daemon_environment(env, daemon.folder), cwd=daemon.folder,
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    try:
        yield process
    finally:
        stop_group(process)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group `process` leads, SIGKILL to what is left of it after STOP_TIMEOUT seconds."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and group_alive(process):
            time.sleep(0.2)
        if not group_alive(process):
            break
    process.wait()


def group_alive(process: subprocess.Popen[bytes]) -> bool:
    """True while a process of the group `process` leads is running (the leader reaped when it has ended). A zombie
    is not running: an executor whose worker ended first may stay one, when the container's init reaps nothing."""
    process.poll()
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no /proc: the signal's answer only
    for stat in proc.glob("[0-9]*/stat"):
        try:
            state, _, group = stat.read_text(encoding="utf-8").rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue  # ended meanwhile
        if int(group) == process.pid and state != "Z":
            return True
    return False


def alive_workers(ui: str) -> int | None:
    """The master's count of alive workers, from its web UI's JSON; None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=5) as answer:
            found: int = json.load(answer)["aliveworkers"]
            return found
    except (OSError, urllib.error.URLError, ValueError, KeyError):
        return None


def wait_for_workers(ui: str, started: list[tuple[Daemon, subprocess.Popen[bytes]]]) -> None:
    """Until the master at web UI `ui` counts WORKERS alive workers.

    Raises:
        RehearsalError: a daemon exited, or the workers did not register within REGISTER_TIMEOUT seconds (the
            daemons' logs named).
    """
    deadline, alive = time.monotonic() + REGISTER_TIMEOUT, None
    while time.monotonic() < deadline:
        alive = alive_workers(ui)
        if alive == WORKERS:
            return
        ended = [(daemon, process.returncode) for daemon, process in started if process.poll() is not None]
        if ended:
            daemon, code = ended[0]
            raise RehearsalError(f"{daemon.name} exited {code} while the cluster started; expected it running",
                                 daemon.log)  # fmt: skip
        time.sleep(0.5)
    logs = ", ".join(str(daemon.log) for daemon, _ in started)
    raise RehearsalError(f"the master at {ui} counts {alive} alive workers after {REGISTER_TIMEOUT:.0f} s; expected "
                         f"{WORKERS} (see the logs: {logs})")  # fmt: skip


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM's handler while the cluster runs: exit as an exception does, so that the cluster is stopped."""
    raise SystemExit(128 + signum)


@contextmanager
def standalone_cluster(venv: Path, root: Path, env: Mapping[str, str]) -> Iterator[str]:
    """A master and WORKERS workers of `venv`'s pyspark on 127.0.0.1, in folders under `root`, run with `env`;
    yields the master's URL once every worker has registered, and stops them all on exit, a SIGTERM of this process
    included (the daemons are in sessions of their own: nothing else would stop them).

    Raises:
        RehearsalError: as `wait_for_workers`.
        SystemExit: this process got SIGTERM (the cluster stopped).
    """
    names = ["master", "master-ui", *(f"worker-{n}-ui" for n in range(1, WORKERS + 1))]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    with ExitStack() as stack:
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        stack.callback(signal.signal, signal.SIGTERM, previous)
        started = [(daemon, stack.enter_context(running(daemon, env))) for daemon in daemons(venv, root, ports)]
        wait_for_workers(f"http://127.0.0.1:{ports['master-ui']}", started)
        yield f"spark://127.0.0.1:{ports['master']}"
