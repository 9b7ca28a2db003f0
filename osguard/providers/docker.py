"""The ``docker`` provider: every episode in a fresh container of osguard's desktop image.

The image is built by ``osguard image build`` (see ``osguard.images``). An environment is
two containers:

- the environment itself, with **no network** (its own loopback only: it cannot reach
  the host's loopback services, other environments or any other address), running as
  ``user`` (uid 1000, home ``/home/user``, passwordless sudo) with a memory and process
  limit, no privileges and only the capabilities sudo and root variants need; its X
  display is ``:0``; the server listens on a unix socket in a volume
  (``/run/osguard/s/server.sock``);
- its port forwarder (``<name>-port``): ``_forward.py`` on the host's network namespace,
  listening on 127.0.0.1 on a port allocated under a file lock, forwarding each
  connection to that socket through the shared volume. It has no capability, a
  read-only root, and runs nothing else.

The engine itself runs with ``--bridge=none --iptables=false`` (scripts/docker-engine.sh),
so no container ever gets an address beyond loopback. No host path is ever mounted;
files go in and out through the protocol. Both containers carry ``osguard=1``, so strays
are found and removed by :meth:`DockerProvider.cleanup_all` (``osguard env down --all``),
and every environment has a state record (``osguard env list``), like the local ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from osguard.errors import EnvironmentError_, OsguardError, ProviderUnavailable
from osguard.providers import _state
from osguard.providers.base import Capabilities, EnvironmentInfo

if TYPE_CHECKING:
    import docker

    from osguard.providers.client import HttpEnvironment

LABEL = "osguard"
PORT_RANGE = (20000, 32000)  # below the kernel's ephemeral range (32768-60999)
PORT_RESERVATION_SECONDS = 120.0
# Docker's default capability set minus what neither sudo nor a root variant needs.
CAP_DROP = ["NET_RAW", "NET_BIND_SERVICE", "MKNOD", "SETFCAP", "SETPCAP", "SYS_CHROOT"]
_READY_POLL = 0.05
SOCKET_PATH = "/run/osguard/s/server.sock"  # in the image's /run/osguard volume
# The forwarder container's program: serves only the connecting user's uid (and root).
FORWARDER_PROGRAM = Path(__file__).with_name("_forward.py")
HOME = "/home/user"
# Where `user` can write, as sized tmpfs volumes when the engine cannot bound the layer:
# volumes (not tmpfs mounts), so that `docker cp` reads them for commit and seeding.
SIZED_FOLDERS = (HOME, "/tmp", "/var/tmp")
SEEDED = "/run/osguard/home-seeded"  # written once the home volume holds the image's home


def ports_dir() -> Path:
    """Where port reservations live: ``$XDG_CACHE_HOME/osguard/docker-ports`` (0700).

    Per user and machine-wide on purpose (not ``$OSGUARD_STATE_DIR``): every process of
    this user starting containers must see the same reservations. Not in ``/tmp``, where
    another user could plant the folder or a symlink first.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # The user's own cache folder may be a symlink they made; below it nothing is followed.
    return Path(os.path.realpath(base)) / "osguard" / "docker-ports"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[int]:
    """Hold an exclusive lock on ``<ports dir>/<name>.lock``; yields the folder's descriptor.

    Raises:
        EnvironmentError_: the folder or the lock file is not this user's alone (a
            symlink, another owner, writable by others).
    """
    from osguard.providers._private import UnsafePath, open_private_dir, open_private_file

    folder = ports_dir()
    try:
        dir_fd = open_private_dir(folder)
    except UnsafePath as exc:
        raise EnvironmentError_(f"docker port reservations: {exc}") from None
    try:
        try:
            lock_fd = open_private_file(dir_fd, f"{name}.lock", shown=str(folder / f"{name}.lock"))
        except UnsafePath as exc:
            raise EnvironmentError_(f"docker port reservations: {exc}") from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            yield dir_fd
        finally:
            os.close(lock_fd)  # releases the lock
    finally:
        os.close(dir_fd)


def _read_book(dir_fd: int) -> dict[str, Any]:
    from osguard.providers._private import UnsafePath, read_private

    try:
        book = json.loads(read_private(dir_fd, "ports.json") or b"{}")
    except (UnsafePath, ValueError):
        return {}
    return book if isinstance(book, dict) else {}


def allocate_port() -> int:
    """A free TCP port on 127.0.0.1, reserved for a while against parallel starts.

    Two osguard processes starting containers at once would otherwise both see the same
    port free (the server binds it only a moment later, inside the container). Under a
    file lock, a port is taken only if it binds now and no live reservation names it.
    """
    from osguard.providers._private import write_private

    with _locked("ports") as dir_fd:
        now = time.time()
        try:
            reservations = {int(k): float(v) for k, v in _read_book(dir_fd).items()}
        except (TypeError, ValueError):
            reservations = {}
        reservations = {p: t for p, t in reservations.items() if t > now}
        rng = random.Random()
        for _ in range(500):
            port = rng.randint(*PORT_RANGE)
            if port in reservations:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            reservations[port] = now + PORT_RESERVATION_SECONDS
            write_private(dir_fd, "ports.json", json.dumps(reservations).encode())
            return port
    raise EnvironmentError_(f"no free TCP port on 127.0.0.1 in {PORT_RANGE[0]}-{PORT_RANGE[1]}")


def release_port(port: int) -> None:
    """Drop the reservation of ``port`` (the container that used it is gone)."""
    from osguard.providers._private import write_private

    with _locked("ports") as dir_fd:
        reservations = _read_book(dir_fd)
        if reservations.pop(str(port), None) is not None:
            write_private(dir_fd, "ports.json", json.dumps(reservations).encode())


class DockerProvider:
    """Starts environments as containers of osguard's desktop image.

    Args:
        image: image to start by default (a tag or id); None picks the newest build of
            the current sources, ``full`` if built, else ``base``.
        flavor: with ``image=None``, insist on this flavour (``base`` or ``full``).
        mem_limit: memory limit per container (Docker syntax, e.g. ``"2g"``).
        pids_limit: process limit per container (a fork bomb stops there).
        shm_size: size of ``/dev/shm`` (browsers need more than Docker's 64 MB).
        geometry: screen size ``WxH``.
        disk_mb: writable space in MiB (``osguard.server.limits.DISK_MB``): the whole
            container layer where the engine supports ``--storage-opt size``, else the
            home, /tmp, /var/tmp and /run/lock as sized tmpfs (see docs/environments.md).
        detached: the containers outlive the process that started them (``osguard env
            up``); by default a reaper removes them when that process ends, however.
    """

    name = "docker"

    def __init__(self, image: str | None = None, flavor: str | None = None, *, mem_limit: str = "2g",
                 pids_limit: int = 1024, shm_size: str = "256m", geometry: str = "1920x1080",
                 disk_mb: int | None = None, detached: bool = False) -> None:
        import re

        from osguard.server.limits import DISK_MB

        disk_mb = DISK_MB if disk_mb is None else disk_mb
        if isinstance(disk_mb, bool) or not isinstance(disk_mb, int) or disk_mb < 16:
            raise OsguardError(f"docker provider: disk_mb must be a whole number of MiB, at least 16, got {disk_mb!r}")
        self.disk_mb = disk_mb
        self.detached = detached
        if not re.fullmatch(r"[1-9][0-9]{2,4}x[1-9][0-9]{2,4}", geometry):
            raise OsguardError(f"docker provider: geometry must look like 1920x1080, got {geometry!r}")
        if flavor is not None:
            from osguard.images.build import get_flavor

            get_flavor(flavor)
        self.image = image
        self.flavor = flavor
        self.mem_limit = mem_limit
        self.pids_limit = pids_limit
        self.shm_size = shm_size
        self.geometry = geometry
        self._client: "docker.DockerClient | None" = None

    # -- engine and image -------------------------------------------------------------
    def _engine(self) -> "docker.DockerClient":
        if self._client is None:
            from osguard.images.build import engine_client

            self._client = engine_client()
        return self._client

    def _default_image(self) -> str:
        from osguard.images.build import FLAVORS, find_image, get_flavor

        client = self._engine()
        if self.flavor is not None:
            get_flavor(self.flavor)
            names = [self.flavor]
        else:
            names = sorted(FLAVORS, key=lambda n: n != "full")  # full first
        for name in names:
            tag = find_image(name, client)
            if tag is not None:
                return tag
        which = f" ({self.flavor} flavour)" if self.flavor else ""
        flag = f" --flavor {self.flavor}" if self.flavor else ""
        raise ProviderUnavailable(
            f"no osguard desktop image{which} built from the current sources is in the Docker engine; "
            f"run `osguard image build{flag}`"
        )

    def _resolve(self, image: str | None) -> Any:
        import docker

        ref = image or self.image or self._default_image()
        try:
            return self._engine().images.get(ref)
        except docker.errors.ImageNotFound:
            raise ProviderUnavailable(f"docker image {ref!r} does not exist in the engine; "
                                      "run `osguard image build` (or check the tag)") from None

    def available(self) -> str | None:
        """None when containers can start here, else why not (no SDK, engine or image)."""
        import importlib.util

        if importlib.util.find_spec("docker") is None:
            return "the docker Python SDK is not installed: pip install docker"
        try:
            self._resolve(None)
        except OsguardError as exc:
            return str(exc)
        return None

    def nature(self, image: str | None = None) -> Capabilities:
        """What environments of ``image`` offer by nature, read from the image's labels
        without starting one: a display, root (sudo inside), the applications the image was
        built with. See ``osguard.providers.nature``."""
        image_obj = self._resolve(image)
        labels = image_obj.labels or {}
        return Capabilities(gui=True, accessibility=True, root=True,
                            apps=frozenset(a for a in labels.get("osguard.apps", "").split(",") if a),
                            recording=True, notes=(f"image {_image_name(image_obj)}",))

    # -- lifecycle --------------------------------------------------------------------
    def start(self, *, image: str | None = None, timeout: float = 60, template: Any = None) -> "HttpEnvironment":
        """Run a fresh environment container (and its port forwarder) and wait for its server.

        Args:
            image: an image tag or id (e.g. one made by :meth:`commit`); default: the
                provider's image.
            template: a ``osguard.builder.template.Template`` made on this provider and
                image: its files are put into the new container's home, /tmp and /var/tmp
                volumes before its session starts.
            timeout: seconds to wait for the server.

        Raises:
            ProviderUnavailable: no engine or no image.
            EnvironmentError_: a container could not start, exited, or the server did not
                answer in time (the message carries the end of its log).
        """
        image_obj = self._resolve(image)
        client = self._engine()
        port = allocate_port()
        name = f"osguard-{uuid.uuid4().hex[:12]}"
        labels = {LABEL: "1", "osguard.provider": "docker", "osguard.env": name, "osguard.port": str(port),
                  # which state folder recorded it: `env down --all` cleans only its own strays
                  "osguard.state": str(_state.state_dir().resolve())}
        # Who owns it (``PID:START``): the reaper removes it when this process ends, however
        # it ends; `env list` removes what a dead owner left if the reaper could not, and
        # `env down --all` keeps it while its owner runs. Always set (empty when detached):
        # a committed image carries its container's labels.
        labels["osguard.owner"] = ""
        if not self.detached:
            owner = _state.owner()
            labels["osguard.owner"] = f"{owner['pid']}:{owner['start']}"
            _reaper(labels["osguard.owner"])
        created: list[str] = []

        def stop() -> None:
            _remove_all(client, created)
            release_port(port)
            _state.remove_record(name)

        try:
            disk = self._disk_options(client, image_obj)
            env_container = self._run(
                client, image_obj.id, name, created,
                **disk,
                network_mode="none",
                # sudo resolves the host name; with no network nothing else maps it.
                hostname="osguard", extra_hosts={"osguard": "127.0.1.1"},
                user="1000:1000",
                environment={"DISPLAY": ":0"},
                labels={**labels, "osguard.role": "env"},
                mem_limit=self.mem_limit,
                memswap_limit=self.mem_limit,  # no swap beyond the limit
                pids_limit=self.pids_limit,
                shm_size=self.shm_size,
                cap_drop=CAP_DROP,
            )
            if template is not None and "entrypoint" not in disk:
                raise EnvironmentError_("docker: templates need the sized home volumes (this engine "
                                        "bounds the container layer instead); build each row fresh instead")
            if "entrypoint" in disk:
                _seed_home(client, env_container.id, image_obj, template.archive if template is not None else None,
                           labels={**labels, "osguard.role": "probe"})
            # The forwarder: host loopback → the environment's socket, through the shared
            # volume, for this user (and root) only: osguard's own forwarder program
            # (`_forward.py`, run from its source), with no capability and a read-only root.
            forwarder = self._run(
                client, image_obj.id, f"{name}-port", created,
                entrypoint=["python3", "-S", "-c", FORWARDER_PROGRAM.read_text(encoding="utf-8"),
                            str(port), SOCKET_PATH, str(os.getuid()), "0"],
                command=[],
                network_mode="host",
                user="1000:1000",
                # only the socket's volume: never the environment's home, /tmp or /var/tmp
                # volumes (a module planted there would run in the host's network namespace)
                mounts=[_socket_volume(env_container)],
                working_dir="/",
                labels={**labels, "osguard.role": "port"},
                mem_limit="64m",
                pids_limit=256,  # two threads per open connection
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                read_only=True,
            )
            endpoint = f"http://127.0.0.1:{port}"
            server = _wait_ready([env_container, forwarder], port, timeout)
        except BaseException:
            stop()
            raise
        return self._finish(name, endpoint, image_obj, env_container.id, forwarder.id, port, server, stop)

    def _disk_options(self, client: "docker.DockerClient", image_obj: Any) -> dict[str, Any]:
        """``containers.run`` options bounding the environment's writable space.

        Where the engine's storage driver supports it (overlay2 on xfs with pquota,
        btrfs, zfs), ``storage_opt`` bounds the whole container layer. Elsewhere (overlay2
        on ext4, as measured here) the places ``user`` can write are sized tmpfs: /tmp,
        /var/tmp, /run/lock, and the home, a tmpfs volume seeded with the image's home
        (``_seed_home``) before the session starts; root's writes to system folders
        (through sudo) are then not bounded. Memory-backed tmpfs count against ``mem_limit``.
        """
        command = ["--unix", SOCKET_PATH, "--geometry", self.geometry]
        size = f"{self.disk_mb}m"
        if _supports_storage_opt(client):
            return {"command": command, "storage_opt": {"size": f"{self.disk_mb}M"}}
        import docker

        config = (image_obj.attrs or {}).get("Config") or {}
        entrypoint = config.get("Entrypoint")
        sized = [docker.types.Mount(folder, None, type="volume", labels={LABEL: "1"},
                                    driver_config=docker.types.DriverConfig(
                                        "local", {"type": "tmpfs", "device": "tmpfs", "o": f"size={size}"}))
                 for folder in SIZED_FOLDERS]
        options: dict[str, Any] = {"command": command, "mounts": sized, "tmpfs": {"/run/lock": f"size={size},mode=1777"}}
        if entrypoint:  # (an image without one is no osguard image: it fails as it is)
            # The session starts only once the sized folders hold the image's files.
            options["entrypoint"] = ["/bin/sh", "-c", f'while [ ! -e {SEEDED} ]; do sleep 0.02; done; exec "$@"',
                                     "osguard-seed", *entrypoint]
        return options

    def _run(self, client: "docker.DockerClient", image_id: str, name: str, created: list[str], **options: Any) -> Any:
        """``containers.run`` detached; records the name at once so a failure can remove it."""
        from osguard.server.limits import ENV_LOG_BYTES

        created.append(name)
        # What the session prints (an agent can write to PID 1's stdout) stays bounded on the host.
        log_config = {"type": "json-file", "config": {"max-size": str(ENV_LOG_BYTES), "max-file": "1"}}
        try:
            return client.containers.run(image_id, name=name, detach=True, privileged=False, log_config=log_config,
                                         **options)
        except Exception as exc:
            raise EnvironmentError_(f"docker could not start container {name} of {_image_name(client.images.get(image_id))}: "
                                    f"{exc}") from exc

    def _finish(self, name: str, endpoint: str, image_obj: Any, env_id: str, forwarder_id: str, port: int,
                server: dict[str, Any], stop: Any) -> "HttpEnvironment":
        from osguard.providers.client import HttpEnvironment

        labels = image_obj.labels or {}
        capabilities = Capabilities(
            gui=bool(server.get("gui")),
            accessibility=bool(server.get("accessibility")),
            root=True,  # passwordless sudo in the image
            apps=frozenset(a for a in labels.get("osguard.apps", "").split(",") if a),
            recording=bool(server.get("recording")),
            notes=tuple(server.get("notes") or ()),
        )
        info = EnvironmentInfo(
            id=name, provider="docker", endpoint=endpoint, image=_image_name(image_obj),
            extra={"container_id": env_id, "forwarder_id": forwarder_id, "image_id": image_obj.id,
                   "port": port, "flavor": labels.get("osguard.flavor")},
        )
        _state.write_record({
            "id": name, "provider": "docker", "endpoint": endpoint, "created": time.time(),
            "capabilities": capabilities.to_json(), "info_extra": info.extra, "image": info.image,
        })
        return HttpEnvironment(endpoint, info, capabilities, stop, view_factory=self._engine_view)

    def _engine_view(self, env: "HttpEnvironment") -> Any:
        """The trusted view of a docker environment: through the engine (providers/view.py)."""
        from osguard.providers.view import EngineView

        return EngineView(env, self._engine())

    # -- records (osguard env list / down, resumed runs) ---------------------------------
    def attach(self, record: dict[str, Any]) -> "HttpEnvironment":
        """A client for an environment started by another process (from its state record)."""
        from osguard.providers.client import HttpEnvironment

        extra = dict(record.get("info_extra", {}))
        caps = record.get("capabilities", {})
        capabilities = Capabilities(
            gui=caps.get("gui", False), accessibility=caps.get("accessibility", False),
            root=caps.get("root", False), apps=frozenset(caps.get("apps", [])),
            recording=caps.get("recording", False), notes=tuple(caps.get("notes", [])),
        )
        info = EnvironmentInfo(id=record["id"], provider="docker", endpoint=record["endpoint"],
                               image=record.get("image"), extra=extra)
        return HttpEnvironment(record["endpoint"], info, capabilities, lambda: self.teardown(record),
                               view_factory=self._engine_view)

    def teardown(self, record: dict[str, Any]) -> None:
        """Remove the containers of ``record`` (running or not) and forget it."""
        from osguard.images.build import engine_client

        extra = record.get("info_extra", {})
        try:
            client = self._client or engine_client(timeout=30)
        except ProviderUnavailable:
            client = None
        if client is not None:
            _remove_all(client, [c for c in (extra.get("container_id"), extra.get("forwarder_id")) if c])
            remove_evaluation(client, record["id"])
        if isinstance(extra.get("port"), int):
            release_port(extra["port"])
        _state.remove_record(record["id"])

    def template_support(self, env: "HttpEnvironment") -> str | None:
        """None when a template captured in ``env`` can be restored into new containers of
        its image (the home, /tmp and /var/tmp are seeded volumes), else why not."""
        client = self._engine()
        if _supports_storage_opt(client):
            return "this engine bounds the container layer; the home is not a seeded volume"
        return None

    def commit(self, env: "HttpEnvironment", tag: str) -> str:
        """Save a running environment's file system as image ``tag``; returns its id.

        The builder prepares a variant once, commits it, and later episodes start from
        the tag with ``start(image=tag)`` in seconds. Labels (flavour, apps) carry over;
        the server's socket volume does not (volumes are never committed).

        Raises:
            OsguardError: ``env`` is not a docker environment, or its container is gone.
        """
        import docker

        container_id = env.info.extra.get("container_id") if env.info.provider == "docker" else None
        if not container_id:
            raise OsguardError(f"cannot commit environment {env.info.id}: it is a {env.info.provider!r} "
                               "environment, not a docker one")
        repository, _, version = tag.rpartition(":")
        if not repository or "/" in version:
            repository, version = tag, "latest"
        client = self._engine()
        try:
            container = client.containers.get(container_id)
            if not any(m.get("Destination") in SIZED_FOLDERS and m.get("Type") == "volume"
                       for m in container.attrs.get("Mounts", [])):
                image = container.commit(repository=repository, tag=version,
                                         message=f"osguard: committed from {env.info.id}")
                return image.id
            return _commit_with_home(client, container, repository, version, env.info.id)
        except docker.errors.NotFound:
            raise OsguardError(f"cannot commit environment {env.info.id}: its container is gone") from None

    @staticmethod
    def cleanup_all(own_state_only: bool = False, force: bool = True) -> list[str]:
        """Remove every container labelled ``osguard=1`` (running or not); returns the
        environment names removed. Empty when no engine answers (nothing can be left then).

        Args:
            own_state_only: only containers started under this process's state folder
                (``$OSGUARD_STATE_DIR``), so cleaning one set of environments never stops
                another user's or another run's.
            force: also containers whose owner process (label ``osguard.owner``) still
                runs; False keeps them (``env down --all`` without ``--force``).
        """
        try:
            from osguard.images.build import engine_client

            client = engine_client(timeout=30)
        except ProviderUnavailable:
            return []
        wanted = [f"{LABEL}=1"]
        if own_state_only:
            wanted.append(f"osguard.state={_state.state_dir().resolve()}")
        containers = client.containers.list(all=True, filters={"label": wanted})
        # Forwarders first: they hold the environments' socket volumes.
        containers.sort(key=lambda c: c.labels.get("osguard.role") != "port")
        removed: list[str] = []
        # a detached environment's label names no owner (it must not die with it): its
        # record still does, and `env down --all` keeps it while that owner runs
        kept = set() if force else {record["id"] for record in _state.read_records()
                                    if _state.owner_alive(record.get("owner"))}
        for container in containers:
            if not force and (_owner_alive(container.labels.get("osguard.owner"))
                              or container.labels.get("osguard.env") in kept):
                continue
            _remove_all(client, [container.id])
            env_name = container.labels.get("osguard.env", container.name)
            port = container.labels.get("osguard.port")
            if port and port.isdigit():
                release_port(int(port))
            _state.remove_record(env_name)
            if env_name not in removed:
                removed.append(env_name)
        return removed


# --------------------------------------------------------------------------- helpers

def _owner_alive(label: str | None) -> bool:
    """Whether the owner named by an ``osguard.owner`` label (``PID:START``; empty when
    detached) still runs."""
    pid, _, start = (label or "").partition(":")
    if not (pid.isdigit() and start.isdigit()):
        return False
    return _state.owner_alive({"pid": int(pid), "start": int(start)})


_REAPERS: dict[str, tuple[Any, int]] = {}
_REAPER_LOCK = __import__("threading").Lock()


def _reaper(owner: str) -> None:
    """Start (once per owner) the process that removes the owner's containers when the
    owner ends (``osguard/providers/_docker_reaper.py``). The owner keeps the pipe's
    write end open for its whole life: only its end closes it."""
    import subprocess
    import sys

    with _REAPER_LOCK:
        if owner in _REAPERS and _REAPERS[owner][0].poll() is None:
            return
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "osguard.providers._docker_reaper", owner],
                                    stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        _REAPERS[owner] = (proc, write_end)


def reap_dead_owners(own_state_only: bool = True) -> list[str]:
    """Remove containers whose owner process is gone (its reaper could not, e.g. it was
    killed too), and records of this state folder whose containers are all gone; returns
    the environment names. Empty without an engine."""
    from osguard.providers._docker_reaper import reap

    try:
        from osguard.images.build import engine_client

        client = engine_client(timeout=30)
    except ProviderUnavailable:
        return []
    wanted = [f"{LABEL}=1", "osguard.owner"]
    if own_state_only:
        wanted.append(f"osguard.state={_state.state_dir().resolve()}")
    names: list[str] = []
    # the low-level list (no inspect per container): a container removed meanwhile (by a
    # reaper) must not fail the listing
    owners = {(c.get("Labels") or {}).get("osguard.owner", "")
              for c in client.api.containers(all=True, filters={"label": wanted})}
    for owner in sorted(owners):
        pid, _, start = owner.partition(":")
        if pid.isdigit() and start.isdigit() and not _state.owner_alive({"pid": int(pid), "start": int(start)}):
            names += reap(owner)
    # A record whose containers are all gone names nothing that runs (an owner killed
    # while its stop() was removing them, before it removed the record): forget it.
    # Records are written only once the containers run, so none is still starting.
    present = {(c.get("Labels") or {}).get("osguard.env")
               for c in client.api.containers(all=True, filters={"label": [f"{LABEL}=1"]})}
    for record in _state.read_records():
        if record.get("provider") == "docker" and record.get("id") not in present:
            _state.remove_record(record["id"])  # (its port reservation expires by itself)
            names.append(record["id"])
    return names


_STORAGE_OPT: dict[str, bool] = {}
_FOLDER_TARS: dict[str, bytes | None] = {}


def _supports_storage_opt(client: "docker.DockerClient") -> bool:
    """Whether the engine can bound a container's layer (``--storage-opt size=``)."""
    key = str(getattr(client.api, "base_url", ""))
    if key not in _STORAGE_OPT:
        info = client.info()
        status = dict(info.get("DriverStatus") or [])
        driver = info.get("Driver", "")
        _STORAGE_OPT[key] = driver in ("btrfs", "zfs", "devicemapper") or (
            driver == "overlay2" and status.get("Backing Filesystem") == "xfs")
    return _STORAGE_OPT[key]


def _folder_tar(client: "docker.DockerClient", image_obj: Any, folder: str,
                labels: dict[str, str] | None = None) -> bytes | None:
    """``folder`` of the image as a tar (from a created, never started container, labelled
    ``labels`` so the reaper of a killed owner removes it too; cached per image id, since an
    image id names fixed content); None when the image has none."""
    import docker

    key = f"{image_obj.id}:{folder}"
    if key not in _FOLDER_TARS:
        probe = client.api.create_container(image_obj.id, entrypoint=["true"], labels=labels or {LABEL: "1"})
        try:
            for name in SIZED_FOLDERS:
                try:
                    stream, _ = client.api.get_archive(probe["Id"], name)
                    _FOLDER_TARS[f"{image_obj.id}:{name}"] = b"".join(stream)
                except docker.errors.NotFound:
                    _FOLDER_TARS[f"{image_obj.id}:{name}"] = None
        finally:
            client.api.remove_container(probe["Id"], force=True, v=True)
    return _FOLDER_TARS[key]


def _marker_tar(name: str) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(tarfile.TarInfo(name))
    return buffer.getvalue()


def _seed_home(client: "docker.DockerClient", container_id: str, image_obj: Any,
               template: bytes | None = None, labels: dict[str, str] | None = None) -> None:
    """Copy the image's home, /tmp and /var/tmp into the container's sized volumes, then a
    template's files (``osguard.builder.template``) over them, then let its session start."""
    for folder in SIZED_FOLDERS:
        data = _folder_tar(client, image_obj, folder, labels)
        if data is not None:
            client.api.put_archive(container_id, os.path.dirname(folder), data)
    if template:
        client.api.put_archive(container_id, "/", template)
    client.api.put_archive(container_id, os.path.dirname(SEEDED), _marker_tar(os.path.basename(SEEDED)))


def folder_archives(client: "docker.DockerClient", container_id: str, folders: Any) -> dict[str, bytes]:
    """``{folder: its tar}`` read through the engine, for those of ``folders`` the container has."""
    import docker

    saved = {}
    for folder in folders:
        try:
            stream, _ = client.api.get_archive(container_id, folder, chunk_size=1 << 20)
            saved[folder] = b"".join(stream)
        except docker.errors.NotFound:
            pass
    return saved


def _commit_with_home(client: "docker.DockerClient", container: Any, repository: str, version: str,
                      env_id: str, pause: bool = True) -> str:
    """Commit a container whose home, /tmp and /var/tmp are sized volumes (volumes are
    never committed): its layer first, then those folders copied into a layer of their
    own, replacing the image's. ``pause=False``: the caller has paused the container."""
    import json as _json

    saved = folder_archives(client, container.id, SIZED_FOLDERS)
    config = (client.images.get(container.image.id).attrs or {}).get("Config") or {}
    changes = [f"ENTRYPOINT {_json.dumps(config.get('Entrypoint') or [])}", f"CMD {_json.dumps(config.get('Cmd') or [])}"]
    if config.get("User"):
        changes.append(f"USER {config['User']}")
    layer = container.commit(message=f"osguard: committed from {env_id} (without its home)", changes=changes,
                             pause=pause)
    owned = {k: v for k, v in (container.labels or {}).items() if k.startswith("osguard")}
    helper = client.containers.create(layer.id, entrypoint=["/bin/rm", "-rf", *saved], command=[], user="0",
                                      labels={**owned, LABEL: "1", "osguard.role": "helper"}, network_mode="none")
    try:
        helper.start()
        helper.wait(timeout=60)
        for folder, data in saved.items():
            client.api.put_archive(helper.id, os.path.dirname(folder), data)
        image = helper.commit(repository=repository, tag=version,
                              message=f"osguard: committed from {env_id}", changes=changes)
    finally:
        helper.remove(force=True, v=True)
    return image.id


def remove_evaluation(client: "docker.DockerClient", env_id: str) -> None:
    """Remove what the trusted view of ``env_id`` made to evaluate it (its evaluation
    container and the commit ``osguard-eval:<env_id>``) where the process that made them
    ended without stopping the environment (``osguard build --keep``, a killed run)."""
    import docker

    try:
        stray = client.api.containers(all=True, filters={"label": [f"osguard.env={env_id}", "osguard.role=eval"]})
        _remove_all(client, [c["Id"] for c in stray])
        client.images.remove(f"osguard-eval:{env_id}", force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError:  # the engine refused (an image in use): `docker image rm` it later
        pass


def _socket_volume(container: Any) -> Any:
    """The mount of ``container``'s /run/osguard volume (the server socket's), for its
    forwarder."""
    import docker

    container.reload()
    folder = os.path.dirname(os.path.dirname(SOCKET_PATH))
    for mount in container.attrs.get("Mounts") or ():
        if mount.get("Destination") == folder and mount.get("Name"):
            return docker.types.Mount(folder, mount["Name"], type="volume")
    raise EnvironmentError_(f"container {container.name} has no {folder} volume (is it an osguard image?)")


def _image_name(image: Any) -> str:
    # Prefer a content-addressed or committed tag over the moving ``:base``/``:full`` alias.
    tags = sorted(image.tags or [], key=lambda t: t.rsplit(":", 1)[-1] in ("base", "full"))
    return tags[0] if tags else image.short_id


REMOVAL_WAIT_SECONDS = 30.0


def _remove_all(client: "docker.DockerClient", containers: list[str]) -> None:
    """Force-remove containers (ids or names), last started first, with their volumes.

    A container another process is removing at the same time (the reaper of a killed owner
    and `osguard env list` or `env down`) is waited for until it is gone (at most
    ``REMOVAL_WAIT_SECONDS``): whoever returns from here never reports it gone while it
    is still listed."""
    import docker

    for ref in reversed(containers):
        try:
            client.api.remove_container(ref, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise
            _wait_gone(client, ref)


def _wait_gone(client: "docker.DockerClient", ref: str) -> None:
    import docker

    deadline = time.monotonic() + REMOVAL_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(ref)
        except docker.errors.NotFound:
            return
        time.sleep(0.1)


def _wait_ready(containers: list[Any], port: int, timeout: float) -> dict[str, Any]:
    """Poll the server's ``/osguard/info`` through the forwarder until it answers.

    Raises:
        EnvironmentError_: a container exited, or ``timeout`` passed.
    """
    import http.client

    deadline = time.monotonic() + timeout
    checks = 0
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/osguard/info")
            response = conn.getresponse()
            body = response.read()
            if response.status == 200:
                return json.loads(body)
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            conn.close()
        checks += 1
        if checks % 10 == 0:  # every ~0.5 s: did one of them die?
            for container in containers:
                container.reload()
                if container.status in ("exited", "dead"):
                    raise EnvironmentError_(
                        f"container {container.name} exited (code {container.attrs['State'].get('ExitCode')}) "
                        f"before the server answered; its log ends:\n{_log_tail(container)}"
                    )
        if time.monotonic() > deadline:
            raise EnvironmentError_(
                f"the server of {containers[0].name} did not answer at http://127.0.0.1:{port} within "
                f"{timeout:g} s; its log ends:\n{_log_tail(containers[0])}"
            )
        time.sleep(_READY_POLL)


def _log_tail(container: Any, lines: int = 20) -> str:
    try:
        return container.logs(tail=lines).decode("utf-8", "replace").rstrip() or "(empty)"
    except Exception as exc:  # the container may already be gone
        return f"(no log: {exc})"
