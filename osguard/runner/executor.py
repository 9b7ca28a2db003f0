"""Where the units of work of a command run: the local thread pool or a Ray cluster.

``osguard run``, ``check``, ``items build`` and ``score`` hand their units (episodes,
reference rows, interruption states, items) to an ``Executor``; results come back as
each unit ends, in completion order, to the driver, which alone writes them to disk. Two
implementations of the one interface:

- ``LocalExecutor(workers)``: a thread pool in this process (the default);
- ``RayExecutor(address)``: each unit is a Ray task with resources (``Resources``: CPUs,
  the custom resources ``gui`` and ``docker``, memory), scheduled on the nodes that offer
  them. A task whose worker or node dies is run once more (Ray's ``max_retries=1``); a
  second death comes back as a ``TaskFailure`` the caller records as an error row, so a
  unit is never silently lost, and the driver keeps one result per unit.

``import osguard`` never imports Ray: ``RayExecutor`` imports it when it connects.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from osguard.errors import OsguardError

EXECUTORS = ("local", "ray")
PRIVATE_NODE_IP = "127.0.0.2"  # the private one-node Ray (no --address); any 127.x but 127.0.0.1 stays on loopback
EXECUTOR_HELP = ("Where the work runs: local (a thread pool here) or ray (tasks on a Ray cluster; "
                 "needs Ray, the ray extra of osguard; see docs/scale.md).")
ADDRESS_HELP = ("With --executor ray: the cluster's head (HOST:PORT of 'ray start --head'); default "
                "$RAY_ADDRESS, else a private one-node Ray on loopback for this command.")


@dataclass(frozen=True)
class Resources:
    """What one unit needs from the node that runs it (Ray only; the local pool ignores it).

    Attributes:
        cpus: Ray CPUs held while the unit runs (a node started with ``--num-cpus N``
            runs at most N such units at once).
        custom: custom resources by name, e.g. ``{"gui": 1}`` for an environment with a
            display, ``{"docker": 1}`` for a container; only nodes started with
            ``--resources '{"gui": N}'`` run such a unit.
        memory_mb: memory reserved on the node (Ray's ``memory``), 0: none.
    """

    cpus: float = 1.0
    custom: tuple[tuple[str, float], ...] = ()
    memory_mb: int = 0


@dataclass(frozen=True)
class TaskFailure:
    """A unit that produced no result: its worker or node died on every attempt, or the
    function raised. ``reason`` is one line for the error row."""

    reason: str
    attempts: int = 1


@dataclass
class Executor:
    """Runs ``fn(*args)`` for each args tuple and yields ``(index, result)`` as each ends.

    ``result`` is whatever ``fn`` returned, or a ``TaskFailure``. ``fn`` must be a
    module-level function and its arguments picklable (Ray sends them to other
    machines); the local pool calls it in a thread of this process.
    """

    name: str = "local"
    workers: int = 1
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            resources: Sequence[Resources] | None = None) -> Iterator[tuple[int, Any]]:
        """Run every unit; see the class docstring."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop handing out units and cancel those in flight (Ctrl-C)."""
        self._cancelled.set()

    def describe(self) -> dict[str, Any]:
        """What the manifest records about where the work ran."""
        return {"name": self.name}

    def close(self) -> None:
        """Release the executor (disconnect from the cluster)."""


class LocalExecutor(Executor):
    """``workers`` threads of this process."""

    def __init__(self, workers: int = 1):
        super().__init__(name="local", workers=max(1, int(workers)))
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            resources: Sequence[Resources] | None = None) -> Iterator[tuple[int, Any]]:
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="osguard-unit")
        self._pool = pool
        try:
            futures: dict[Future, int] = {pool.submit(fn, *a): i for i, a in enumerate(args)}
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                for fut in finished:
                    if fut.cancelled():
                        continue
                    yield futures[fut], fut.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def cancel(self) -> None:
        super().cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> dict[str, Any]:
        return {"name": "local", "workers": self.workers}


def _check_reachable(address: str) -> None:
    """A clear error before Ray's own long connection retries."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise OsguardError(f"--address {address!r}: expected HOST:PORT of a Ray head (ray start --head --port PORT)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as exc:
        raise OsguardError(f"--address {address}: no Ray cluster answers there ({exc.strerror or exc}); "
                           "start one with 'ray start --head' or fix the address") from None


def _quiet_ray_environment() -> None:
    """No usage statistics leave the machine, no dashboard is started."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")


class RayExecutor(Executor):
    """Ray tasks on the cluster at ``address`` (None: ``$RAY_ADDRESS``, else a private
    one-node Ray on 127.0.0.2 with ``workers`` CPUs and its own token, ended with the
    command)."""

    max_retries = 1  # a dead worker or node costs a unit one more attempt, then a TaskFailure

    def __init__(self, address: str | None = None, workers: int = 1):
        super().__init__(name="ray", workers=max(1, int(workers)))
        _quiet_ray_environment()
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address and address != "auto":
            _check_reachable(address)
        self._temp_dir: str | None = None
        if not address:
            import tempfile

            # a private Ray of this command: its own folder and token (read when Ray is
            # imported), never one saved in ~/.ray
            self._temp_dir = tempfile.mkdtemp(prefix="osguard-ray-")
            if "RAY_AUTH_MODE" not in os.environ:
                import secrets

                os.environ["RAY_AUTH_MODE"] = "token"
                os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        try:
            import ray
        except ImportError:
            raise OsguardError("--executor ray needs Ray: pip install 'osguard[ray]'") from None
        self._ray = ray
        self.address = address
        self._refs: list[Any] = []
        self._remote: dict[Any, Any] = {}
        # Workers find osguard where the driver found it (a source checkout on PYTHONPATH);
        # installed copies on the nodes need nothing.
        try:
            if address:
                extra: dict[str, Any] = {}
                host = address.rpartition(":")[0]
                if host.startswith("127."):
                    # the driver joins the loopback node it runs on (Ray would otherwise
                    # look for one at this machine's outward address)
                    extra["_node_ip_address"] = host
                ray.init(address=address, logging_level="WARNING", log_to_driver=False, **extra)
            else:
                # 127.0.0.2: Ray rewrites 127.0.0.1 into this machine's outward address
                ray.init(num_cpus=self.workers, include_dashboard=False, _node_ip_address=PRIVATE_NODE_IP,
                         _temp_dir=self._temp_dir,
                         logging_level="WARNING", object_store_memory=128 * 1024 * 1024)
        except Exception as exc:  # ConnectionError, version mismatch, ...
            raise OsguardError(f"--executor ray: cannot connect to the Ray cluster"
                               f"{' at ' + address if address else ''}: {type(exc).__name__}: {exc}") from None

    def describe(self) -> dict[str, Any]:
        try:
            nodes = [n for n in self._ray.nodes() if n.get("Alive")]
        except Exception:
            nodes = []
        return {"name": "ray", "address": self.address or "local", "ray": self._ray.__version__, "nodes": len(nodes)}

    def _offered(self) -> dict[str, float]:
        try:
            return dict(self._ray.cluster_resources())
        except Exception:
            return {}

    def _missing(self, need: Resources, offered: dict[str, float]) -> str | None:
        for name, amount in need.custom:
            if offered.get(name, 0) < amount:
                return (f"no node of the Ray cluster offers the resource {name!r} "
                        f"(start such nodes with: ray start --resources '{{\"{name}\": N}}')")
        if need.memory_mb and offered.get("memory", 0) < need.memory_mb * 1024 * 1024:
            return f"no node of the Ray cluster offers {need.memory_mb} MB of memory"
        return None

    def map(self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]],
            resources: Sequence[Resources] | None = None) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        from ray import exceptions as rx

        remote = self._remote.get(fn)
        if remote is None:
            # retry_exceptions=False: only a dead worker or node is retried, never an
            # episode that ended (its result is recorded as it is)
            remote = self._remote[fn] = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(fn)
        offered = self._offered()
        by_ref: dict[Any, int] = {}
        for index, unit_args in enumerate(args):
            need = resources[index] if resources is not None else Resources()
            missing = self._missing(need, offered)
            if missing:
                yield index, TaskFailure(missing, attempts=0)
                continue
            options: dict[str, Any] = {"num_cpus": need.cpus}
            if need.custom:
                options["resources"] = dict(need.custom)
            if need.memory_mb:
                options["memory"] = need.memory_mb * 1024 * 1024
            by_ref[remote.options(**options).remote(*unit_args)] = index
        self._refs = list(by_ref)
        pending = list(by_ref)
        try:
            while pending:
                if self._cancelled.is_set():
                    return
                done, pending = ray.wait(pending, num_returns=1, timeout=0.25)
                for ref in done:
                    index = by_ref[ref]
                    try:
                        value = ray.get(ref)
                    except rx.RayTaskError as exc:  # the function itself raised
                        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                        value = TaskFailure(f"{type(cause).__name__}: {cause}"[:600])
                    except (rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError,
                            rx.OwnerDiedError, rx.RaySystemError, rx.TaskUnschedulableError) as exc:
                        value = TaskFailure(
                            f"ray: the worker running it died on each of {self.max_retries + 1} attempts "
                            f"({type(exc).__name__})", attempts=self.max_retries + 1)
                    except rx.TaskCancelledError:
                        continue
                    yield index, value
        finally:
            if pending:
                self._cancel_refs(pending)
            self._refs = []

    def _cancel_refs(self, refs: list[Any]) -> None:
        for ref in refs:
            try:
                self._ray.cancel(ref)  # not forced: the task's own cleanup (stopping its environment) runs
            except Exception:
                pass

    def cancel(self) -> None:
        super().cancel()
        self._cancel_refs(list(self._refs))

    def close(self) -> None:
        try:
            self._ray.shutdown()
        except Exception:
            pass
        if self._temp_dir is not None:
            import shutil

            shutil.rmtree(self._temp_dir, ignore_errors=True)


def get_executor(name: str = "local", *, address: str | None = None, workers: int = 1) -> Executor:
    """The executor called ``name`` (``local`` or ``ray``).

    Raises:
        OsguardError: an unknown name (with the nearest one), ``--address`` without ray,
            Ray not installed, or no cluster at ``address``.
    """
    check_executor_flags(name, address)
    if name == "local":
        return LocalExecutor(workers)
    return RayExecutor(address, workers)


def as_executor(executor: "Executor | str | None", workers: int = 1) -> Executor:
    """An executor object from a name (None: the local pool with ``workers`` threads)."""
    if executor is None:
        return LocalExecutor(workers)
    if isinstance(executor, str):
        return get_executor(executor, workers=workers)
    return executor


def check_executor_flags(name: str, address: str | None) -> None:
    """Validate ``--executor``/``--address`` before any work starts (no connection yet).

    Raises:
        OsguardError: an unknown executor (with the nearest name), or ``--address``
            without ``--executor ray``.
    """
    if name not in EXECUTORS:
        from osguard._registry import did_you_mean

        raise OsguardError(f"--executor {name!r}: expected one of {', '.join(EXECUTORS)}"
                           f"{did_you_mean(name, EXECUTORS)}")
    if address and name != "ray":
        raise OsguardError("--address applies to --executor ray only")
