"""Build osguard's desktop image from scratch (no registry needed) and find it again.

The image is layered so that CI can build the small flavour quickly:

1. ``osguard/debian-base:bookworm``: a Debian root file system bootstrapped here with
   ``debootstrap --variant=minbase`` from the mirror apt already uses, then imported.
2. ``osguard/desktop:base-<hash>``: Xvfb, openbox, xterm, mousepad, X tools, AT-SPI,
   pyautogui, a ``user`` with passwordless sudo, and the osguard server
   (``Dockerfile.base``).
3. ``osguard/desktop:full-<hash>``: base plus LibreOffice, Thunderbird, Chromium, GIMP
   and VLC (``Dockerfile.full``, inserted into ``Dockerfile.base`` before the server
   layers, so both flavours share the base layers and a server change rebuilds only
   the last few layers of either).

``<hash>`` is a content hash of the build inputs (the Dockerfile, the entry point, the
server's sources, the pip pins), so a changed server gets a new tag and an unchanged one
is a cache hit found in milliseconds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from osguard.errors import OsguardError, ProviderUnavailable

if TYPE_CHECKING:
    import docker

IMAGE_REPOSITORY = "osguard/desktop"
DEBIAN_BASE_IMAGE = "osguard/debian-base:bookworm"
DEBIAN_SUITE = "bookworm"
# Python packages installed into the image with pip (Debian does not package them).
# They are built as wheels on the host with the host's pip (so the host's index and
# certificate settings apply) and installed offline inside with --no-deps: PyAutoGUI
# names the old "python3-xlib" 0.15 distribution, which would shadow Debian's
# python3-xlib 0.33 (same ``Xlib`` package) and break screenshots (0.15 returns image
# data as str); Debian's 0.33 serves both.
IMAGE_PIP_REQUIREMENTS = (
    "PyAutoGUI==0.9.54",
    "MouseInfo==0.1.3",
    "PyGetWindow==0.0.9",
    "PyMsgBox==2.0.1",
    "pyperclip==1.11.0",
    "PyRect==0.2.0",
    "PyScreeze==1.0.1",
    "pytweening==1.2.0",
)
_HERE = Path(__file__).resolve().parent
_SERVER_DIR = _HERE.parent / "server"


class ImageBuildError(OsguardError):
    """Raised when the desktop image cannot be built (debootstrap, import or a build step failed)."""

    exit_code = 1


@dataclass(frozen=True)
class Flavor:
    """One buildable flavour of the desktop image.

    Attributes:
        name: ``base`` or ``full``.
        extra_layers: file in ``osguard/images`` inserted into ``Dockerfile.base`` at
            its ``@flavor-layers`` line (None: the base Dockerfile as it is).
        apps: desktop applications it provides (``Capabilities.apps``).
        description: one line for ``osguard image list``.
    """

    name: str
    extra_layers: str | None
    apps: tuple[str, ...]
    description: str


FLAVORS: dict[str, Flavor] = {
    "base": Flavor("base", None, ("mousepad", "xterm"),
                   "Xvfb, openbox, xterm, mousepad, AT-SPI, pyautogui, the osguard server"),
    "full": Flavor("full", "Dockerfile.full",
                   ("chrome", "gimp", "libreoffice", "mousepad", "nautilus", "thunderbird", "vlc", "xterm"),
                   "base + LibreOffice, Thunderbird, Chromium, GIMP, VLC, GNOME Files"),
}


@dataclass(frozen=True)
class BuildEvent:
    """A progress report from :func:`build_image` (rendered by ``osguard image build``).

    Attributes:
        phase: ``debian-base`` (debootstrap and import) or ``build:<flavour>``.
        message: the latest line of output worth showing.
        step: current step number within the phase (0 when unknown).
        total: number of steps in the phase (0 when unknown).
    """

    phase: str
    message: str
    step: int = 0
    total: int = 0


ProgressCallback = Callable[[BuildEvent], None]


@dataclass
class BuildResult:
    """What :func:`build_image` did.

    Attributes:
        flavor: the flavour built.
        tag: the content-addressed tag (``osguard/desktop:<flavour>-<hash>``).
        image_id: the engine's image id.
        cached: True when the tag already existed and nothing was built.
        seconds: wall time of the whole call.
        phases: seconds per phase that ran (``debian-base``, ``build:base``, ...).
    """

    flavor: str
    tag: str
    image_id: str
    cached: bool
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------- engine

def engine_client(timeout: float = 120) -> "docker.DockerClient":
    """A client of the local Docker engine.

    Raises:
        ProviderUnavailable: the ``docker`` SDK is missing or no engine answers.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a core dependency
        raise ProviderUnavailable(f"the docker Python SDK is not installed ({exc}); pip install docker") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise ProviderUnavailable(
            f"no Docker engine answers at {os.environ.get('DOCKER_HOST', 'unix:///var/run/docker.sock')} "
            f"({type(exc).__name__}); start one with `bash scripts/docker-engine.sh`"
        ) from exc
    return client


def _image_exists(client: "docker.DockerClient", ref: str) -> Any | None:
    import docker

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


# --------------------------------------------------------------------------- inputs

def get_flavor(name: str) -> Flavor:
    """The flavour called ``name``.

    Raises:
        OsguardError: unknown name (with the nearest known one suggested).
    """
    try:
        return FLAVORS[name]
    except KeyError:
        from osguard._registry import did_you_mean

        raise OsguardError(f"unknown image flavour {name!r}: expected one of {', '.join(FLAVORS)}"
                           f"{did_you_mean(name, FLAVORS)}") from None


def _server_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if not _SERVER_DIR.is_dir():
        raise ImageBuildError(f"the osguard server sources are missing: {_SERVER_DIR} is not a directory")
    for path in sorted(_SERVER_DIR.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files["osguard/server/" + path.relative_to(_SERVER_DIR).as_posix()] = path.read_bytes()
    if "osguard/server/__main__.py" not in files:
        raise ImageBuildError(
            f"the osguard server has no __main__.py in {_SERVER_DIR}: `python3 -m osguard.server` cannot run"
        )
    return files


def context_files(flavor: str) -> dict[str, bytes]:
    """Every file of the build context of ``flavor`` (relative path → bytes).

    The server is copied in as a package of its own: it imports nothing else from
    osguard, so a stub ``osguard/__init__.py`` is enough beside it.
    """
    files = {
        "Dockerfile": dockerfile_text(flavor).encode(),
        "entrypoint.sh": (_HERE / "entrypoint.sh").read_bytes(),
        "Xvfb-wrapper.sh": (_HERE / "Xvfb-wrapper.sh").read_bytes(),
        "wheels/image-requirements.txt": ("\n".join(IMAGE_PIP_REQUIREMENTS) + "\n").encode(),
        "osguard/__init__.py": b'"""osguard inside an environment image: only the server is installed."""\n',
    }
    files.update(_server_files())
    return files


def dockerfile_text(flavor: str) -> str:
    """The Dockerfile of ``flavor``: ``Dockerfile.base``, with the flavour's layers inserted."""
    spec = get_flavor(flavor)
    text = (_HERE / "Dockerfile.base").read_text()
    if spec.extra_layers is None:
        return text
    marker = next((line for line in text.splitlines(keepends=True) if line.startswith("# @flavor-layers")), None)
    if marker is None:
        raise ImageBuildError("osguard/images/Dockerfile.base has no '# @flavor-layers' line to insert "
                              f"{spec.extra_layers} at")
    return text.replace(marker, (_HERE / spec.extra_layers).read_text() + "\n" + marker, 1)


def inputs_hash(flavor: str) -> str:
    """Content hash (hex, 12 characters) of the build inputs of ``flavor``."""
    spec = get_flavor(flavor)
    digest = hashlib.sha256()
    digest.update(f"flavor={spec.name};suite={DEBIAN_SUITE};apps={','.join(spec.apps)}\n".encode())
    for rel, data in sorted(context_files(flavor).items()):
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def image_tag(flavor: str) -> str:
    """The content-addressed tag the current sources of ``flavor`` build to."""
    return f"{IMAGE_REPOSITORY}:{flavor}-{inputs_hash(flavor)}"


def find_image(flavor: str, client: "docker.DockerClient | None" = None) -> str | None:
    """The tag of ``flavor`` built from the current sources, or None when not built yet."""
    client = client or engine_client()
    tag = image_tag(flavor)
    return tag if _image_exists(client, tag) is not None else None


# --------------------------------------------------------------------------- debian base

def debian_mirror(etc: Path = Path("/etc")) -> str:
    """The Debian mirror apt on this machine uses (``OSGUARD_DEBIAN_MIRROR`` overrides it).

    There is no built-in fallback: osguard names no package host of its own.

    Args:
        etc: where apt's configuration lives (tests point it elsewhere).

    Raises:
        ImageBuildError: neither the variable nor apt's sources name a Debian
            ``bookworm`` (or ``stable``) mirror.
    """
    override = os.environ.get("OSGUARD_DEBIAN_MIRROR", "").strip()
    if override:
        return override
    for uri, suites in _apt_sources(etc):
        if any(s in (DEBIAN_SUITE, "stable") for s in suites) and "security" not in uri:
            return uri
    raise ImageBuildError(
        f"no Debian mirror to bootstrap from: OSGUARD_DEBIAN_MIRROR is not set and apt's sources "
        f"({etc / 'apt/sources.list'}, {etc / 'apt/sources.list.d'}/*.list and *.sources) name no "
        f"'{DEBIAN_SUITE}' or 'stable' suite; set OSGUARD_DEBIAN_MIRROR to the URL of a Debian mirror"
    )


def _security_mirror(etc: Path = Path("/etc")) -> str | None:
    for uri, suites in _apt_sources(etc):
        if any(s.startswith(f"{DEBIAN_SUITE}-security") for s in suites):
            return uri
    return None


def _apt_sources(etc: Path) -> Iterator[tuple[str, list[str]]]:
    """(URI, suites) of every enabled Debian source, one-line and deb822 formats."""
    paths = [etc / "apt/sources.list"]
    src_dir = etc / "apt/sources.list.d"
    if src_dir.is_dir():
        paths += sorted(src_dir.glob("*.list")) + sorted(src_dir.glob("*.sources"))
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
                if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
                    continue
                for uri in fields.get("uris", "").split():
                    yield uri.rstrip("/"), fields.get("suites", "").split()
        else:
            for line in text.splitlines():
                parts = line.split("#", 1)[0].split()
                if len(parts) >= 3 and parts[0] == "deb":
                    rest = [p for p in parts[1:] if not p.startswith("[")]
                    rest = [p for p in rest if not p.endswith("]")]
                    if len(rest) >= 2:
                        yield rest[0].rstrip("/"), [rest[1]]


_DPKG_EXCLUDES = """\
# osguard: keep the image small (no manuals, no docs besides copyright notices)
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
"""


def ensure_debian_base(client: "docker.DockerClient", progress: ProgressCallback | None = None,
                       force: bool = False) -> bool:
    """Bootstrap and import ``osguard/debian-base:bookworm`` unless it exists.

    Returns:
        True when it was built now, False when it already existed.

    Raises:
        ImageBuildError: not root, no debootstrap, or debootstrap/import failed.
    """
    emit = progress or (lambda event: None)
    if not force and _image_exists(client, DEBIAN_BASE_IMAGE) is not None:
        return False
    if os.geteuid() != 0:
        raise ImageBuildError("bootstrapping the Debian base image needs root (debootstrap); "
                              "run `sudo osguard image build` once")
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if debootstrap is None:
        raise ImageBuildError("debootstrap is not installed: apt-get install debootstrap "
                              "(or run `bash scripts/docker-engine.sh`, which installs it)")
    mirror = debian_mirror()
    workdir = Path(tempfile.mkdtemp(prefix="osguard-debootstrap-", dir="/var/tmp"))
    rootfs = workdir / "root"
    try:
        emit(BuildEvent("debian-base", f"debootstrap --variant=minbase {DEBIAN_SUITE} from {mirror}", 1, 2))
        cmd = [debootstrap, "--variant=minbase", DEBIAN_SUITE, str(rootfs), mirror]
        tail: list[str] = []
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip()
                tail = (tail + [line])[-20:]
                if line.startswith(("I:", "W:", "E:")):
                    emit(BuildEvent("debian-base", line, 1, 2))
        if proc.returncode != 0:
            raise ImageBuildError(f"debootstrap from {mirror} failed (exit {proc.returncode}):\n" + "\n".join(tail))
        _configure_rootfs(rootfs, mirror)
        emit(BuildEvent("debian-base", f"importing the root file system as {DEBIAN_BASE_IMAGE}", 2, 2))
        repo, tag = DEBIAN_BASE_IMAGE.split(":")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            client.api.import_image_from_stream(
                tar.stdout, repository=repo, tag=tag,
                changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                         "LABEL osguard.image=debian-base",
                         'CMD ["/bin/bash"]'],
            )
        finally:
            _, tar_err = tar.communicate()
        if tar.returncode != 0:
            raise ImageBuildError(f"tar of {rootfs} failed: {tar_err.decode(errors='replace').strip()}")
        if _image_exists(client, DEBIAN_BASE_IMAGE) is None:
            raise ImageBuildError(f"docker import did not produce {DEBIAN_BASE_IMAGE}")
        return True
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _configure_rootfs(rootfs: Path, mirror: str) -> None:
    """Sources, apt and dpkg settings of the bootstrapped system; drop caches."""
    lines = [f"deb {mirror} {DEBIAN_SUITE} main", f"deb {mirror} {DEBIAN_SUITE}-updates main"]
    security = _security_mirror()
    if security:
        lines.append(f"deb {security} {DEBIAN_SUITE}-security main")
    (rootfs / "etc/apt/sources.list").write_text("\n".join(lines) + "\n")
    (rootfs / "etc/apt/apt.conf.d/90osguard").write_text(
        'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
        'Acquire::Languages "none";\nDPkg::Use-Pty "false";\n'
    )
    (rootfs / "etc/dpkg/dpkg.cfg.d/90osguard-excludes").write_text(_DPKG_EXCLUDES)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file() and entry.name != "lock":
                entry.unlink()


# --------------------------------------------------------------------------- build

def build_image(flavor: str = "base", *, progress: ProgressCallback | None = None, force: bool = False,
                client: "docker.DockerClient | None" = None) -> BuildResult:
    """Build ``flavor`` (and what it is built on) unless the current sources are built.

    Args:
        flavor: ``base`` or ``full``.
        progress: called with a :class:`BuildEvent` for each line worth showing.
        force: rebuild even when the content-addressed tag exists (layers are still
            reused from the engine's cache; the Debian base is bootstrapped again).
        client: an engine client (default: :func:`engine_client`).

    Returns:
        The tag, image id, whether it was a cache hit and the time per phase.

    Raises:
        ProviderUnavailable: no Docker engine.
        ImageBuildError: a phase failed (the message carries the failing output).
    """
    started = time.monotonic()
    spec = get_flavor(flavor)
    client = client or engine_client()
    tag = image_tag(flavor)
    phases: dict[str, float] = {}
    existing = None if force else _image_exists(client, tag)
    if existing is not None:
        return BuildResult(flavor, tag, existing.id, True, time.monotonic() - started, phases)

    t0 = time.monotonic()
    if ensure_debian_base(client, progress, force=force):
        phases["debian-base"] = time.monotonic() - t0
    base_ref = DEBIAN_BASE_IMAGE

    t0 = time.monotonic()
    image_id = _docker_build(client, spec, tag, base_ref, progress)
    phases[f"build:{flavor}"] = time.monotonic() - t0
    # A moving alias for humans (`docker run osguard/desktop:base`); osguard itself
    # always resolves the content-addressed tag.
    client.images.get(image_id).tag(IMAGE_REPOSITORY, flavor)
    return BuildResult(flavor, tag, image_id, False, time.monotonic() - started, phases)


def _docker_build(client: "docker.DockerClient", spec: Flavor, tag: str, base_ref: str,
                  progress: ProgressCallback | None) -> str:
    emit = progress or (lambda event: None)
    phase = f"build:{spec.name}"
    with tempfile.TemporaryDirectory(prefix="osguard-image-") as ctx:
        for rel, data in context_files(spec.name).items():
            target = Path(ctx, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        _host_wheels(Path(ctx, "wheels"), emit, phase)
        labels = {
            "osguard.image": "desktop",
            "osguard.flavor": spec.name,
            "osguard.apps": ",".join(spec.apps),
            "osguard.inputs": inputs_hash(spec.name),
        }
        step, total, image_id = 0, 0, None
        tail: list[str] = []
        stream = client.api.build(path=ctx, dockerfile="Dockerfile", tag=tag, rm=True, forcerm=True,
                                  network_mode="host", pull=False, decode=True, labels=labels,
                                  buildargs={"BASE_IMAGE": base_ref})
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise ImageBuildError(
                    f"building {tag} failed at step {step}/{total}: {detail.strip()}\n" + "\n".join(tail[-15:])
                )
            if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            text = chunk.get("stream") or ""
            for line in text.splitlines():
                line = line.rstrip()
                if not line:
                    continue
                tail = (tail + [line])[-40:]
                match = re.match(r"Step (\d+)/(\d+) : (.*)", line)
                if match:
                    step, total = int(match.group(1)), int(match.group(2))
                    emit(BuildEvent(phase, match.group(3)[:200], step, total))
                elif not line.startswith(" ---> "):
                    emit(BuildEvent(phase, line[:200], step, total))
        if image_id is None:
            image = _image_exists(client, tag)
            if image is None:
                raise ImageBuildError(f"building {tag} ended without an image:\n" + "\n".join(tail[-15:]))
            image_id = image.id
        return image_id


def _host_wheels(wheel_dir: Path, emit: ProgressCallback, phase: str) -> None:
    """Build the image's pip requirements as wheels with the host's pip.

    The host's pip already knows the index and certificates this machine needs; the
    image then installs offline, so the build needs no PyPI access of its own.
    """
    import sys

    emit(BuildEvent(phase, "pip wheel (host) for image-requirements.txt", 0, 0))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheel_dir),
         "-r", str(wheel_dir / "image-requirements.txt")],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise ImageBuildError("building the image's Python wheels on the host failed "
                              f"(pip wheel of osguard.images.build.IMAGE_PIP_REQUIREMENTS):\n{proc.stderr.strip()[-2000:]}")


# --------------------------------------------------------------------------- listing

@dataclass(frozen=True)
class ImageRecord:
    """One osguard desktop image in the engine (for ``osguard image list``)."""

    tag: str
    flavor: str
    image_id: str
    size_mb: float
    created: str
    current: bool


def list_images(client: "docker.DockerClient | None" = None) -> list[ImageRecord]:
    """The osguard desktop images in the engine; ``current`` marks those of today's sources."""
    client = client or engine_client()
    current = {image_tag(name) for name in FLAVORS}
    records: list[ImageRecord] = []
    for image in client.images.list(name=IMAGE_REPOSITORY):
        for tag in image.tags:
            name = tag.split(":", 1)[1]
            if "-" not in name:
                continue  # the moving alias
            records.append(ImageRecord(tag, image.labels.get("osguard.flavor", "?"), image.short_id,
                                       image.attrs.get("Size", 0) / 1e6, image.attrs.get("Created", "")[:19],
                                       tag in current))
    return sorted(records, key=lambda r: (r.flavor, not r.current, r.tag))


def prune_images(client: "docker.DockerClient | None" = None) -> list[str]:
    """Remove osguard desktop tags built from older sources; returns the tags removed."""
    client = client or engine_client()
    removed = []
    for record in list_images(client):
        if not record.current:
            client.images.remove(record.tag, noprune=False)
            removed.append(record.tag)
    return removed
