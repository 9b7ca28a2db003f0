"""The desktop image: build inputs and tags (no engine needed), and the built image itself.

The image tests need a Docker engine and the ``base`` image of the current sources
(CI runs ``bash scripts/docker-engine.sh`` and ``osguard image build --flavor base``
first); without them they skip and say why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from osguard.errors import OsguardError, ProviderUnavailable
from osguard.images import build as image_build
from osguard.images import (
    FLAVORS,
    build_image,
    context_files,
    debian_mirror,
    engine_client,
    find_image,
    get_flavor,
    image_tag,
    inputs_hash,
)

from _support import docker_skip_reason

_SKIP = docker_skip_reason()
needs_image = pytest.mark.skipif(_SKIP is not None, reason=f"docker: {_SKIP}")


# --------------------------------------------------------------------------- inputs (no engine)

def test_tag_is_content_addressed_and_stable():
    tag = image_tag("base")
    assert tag == f"osguard/desktop:base-{inputs_hash('base')}"
    assert image_tag("base") == tag  # deterministic
    assert image_tag("full") != tag


def test_context_carries_the_server_entrypoint_and_pins():
    files = context_files("base")
    assert "osguard/server/__main__.py" in files
    assert "osguard/server/app.py" in files
    assert not any("__pycache__" in name for name in files)
    assert files["entrypoint.sh"].startswith(b"#!/bin/bash")
    assert b"PyAutoGUI==0.9.54" in files["wheels/image-requirements.txt"]
    # The stub package must not pull the rest of osguard into the image.
    assert not any(name.startswith("osguard/") and not name.startswith(("osguard/server/", "osguard/__init__"))
                   for name in files)


def test_full_flavour_inserts_its_layers_before_the_server():
    base = context_files("base")["Dockerfile"].decode()
    full = context_files("full")["Dockerfile"].decode()
    assert "libreoffice-calc" in full and "libreoffice-calc" not in base
    # Shared prefix (so the engine reuses the base layers), apps before the server copy.
    marker = base.index("# @flavor-layers")
    assert full.startswith(base[:marker])
    assert full.index("libreoffice-calc") < full.index("COPY osguard /opt/osguard/osguard")


def test_a_changed_server_changes_the_tag(monkeypatch, tmp_path):
    """A server edit must never be served from a stale image: it changes the tag."""
    server = tmp_path / "server"
    real = Path(image_build.__file__).resolve().parent.parent / "server"
    subprocess.run(["cp", "-r", str(real), str(server)], check=True)
    monkeypatch.setattr(image_build, "_SERVER_DIR", server)
    before = image_tag("base")
    (server / "app.py").write_text((server / "app.py").read_text() + "\n# edited\n")
    assert image_tag("base") != before
    # __pycache__ is not an input.
    (server / "__pycache__").mkdir(exist_ok=True)
    (server / "__pycache__" / "x.pyc").write_bytes(b"junk")
    edited = image_tag("base")
    (server / "__pycache__" / "x.pyc").write_bytes(b"other junk")
    assert image_tag("base") == edited


def test_server_without_main_is_refused(monkeypatch, tmp_path):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "__init__.py").write_text("")
    monkeypatch.setattr(image_build, "_SERVER_DIR", tmp_path / "server")
    with pytest.raises(OsguardError) as err:
        context_files("base")
    assert str(err.value) == (f"the osguard server has no __main__.py in {tmp_path / 'server'}: "
                              "`python3 -m osguard.server` cannot run")


def test_unknown_flavour_suggests_the_nearest():
    with pytest.raises(OsguardError) as err:
        get_flavor("ful")
    assert str(err.value) == "unknown image flavour 'ful': expected one of base, full; did you mean 'full'?"
    assert set(FLAVORS) == {"base", "full"}


def test_mirror_is_read_from_apt_sources(tmp_path, monkeypatch):
    """Regression: with no apt source the build fell back to a hard-coded public mirror;
    osguard must name no package host, so it now says what to set instead."""
    monkeypatch.delenv("OSGUARD_DEBIAN_MIRROR", raising=False)
    (tmp_path / "apt/sources.list.d").mkdir(parents=True)
    (tmp_path / "apt/sources.list").write_text("# nothing here\n")
    (tmp_path / "apt/sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example.org/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://mirror.example.org/debian/\nSuites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    assert debian_mirror(tmp_path) == "http://mirror.example.org/debian"
    assert image_build._security_mirror(tmp_path) == "http://mirror.example.org/debian-security"
    (tmp_path / "apt/sources.list.d/debian.sources").unlink()
    (tmp_path / "apt/sources.list").write_text("deb [arch=amd64] http://old.example.org/debian bookworm main\n")
    assert debian_mirror(tmp_path) == "http://old.example.org/debian"
    (tmp_path / "apt/sources.list").write_text("deb http://old.example.org/ubuntu jammy main\n")
    with pytest.raises(image_build.ImageBuildError) as err:
        debian_mirror(tmp_path)
    assert str(err.value) == (
        f"no Debian mirror to bootstrap from: OSGUARD_DEBIAN_MIRROR is not set and apt's sources "
        f"({tmp_path / 'apt/sources.list'}, {tmp_path / 'apt/sources.list.d'}/*.list and *.sources) name no "
        "'bookworm' or 'stable' suite; set OSGUARD_DEBIAN_MIRROR to the URL of a Debian mirror")
    monkeypatch.setenv("OSGUARD_DEBIAN_MIRROR", "http://override.example.org/debian")
    assert debian_mirror(tmp_path) == "http://override.example.org/debian"


# --------------------------------------------------------------------------- the built image

def _run_in_image(*argv: str) -> subprocess.CompletedProcess:
    """Run a one-off command in the image (no network, removed afterwards)."""
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", argv[0], image_tag("base"), *argv[1:]],
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.docker
@needs_image
def test_build_of_current_sources_is_a_cache_hit():
    result = build_image("base")
    assert result.cached is True
    assert result.tag == image_tag("base")
    assert result.seconds < 5


@pytest.mark.docker
@needs_image
def test_image_exists_with_labels():
    image = engine_client().images.get(image_tag("base"))
    assert image.labels["osguard.flavor"] == "base"
    assert image.labels["osguard.inputs"] == inputs_hash("base")
    assert image.labels["osguard.apps"] == "mousepad,xterm"
    config = image.attrs["Config"]
    assert config["User"] == "user"
    assert config["Entrypoint"] == ["/opt/osguard/entrypoint.sh"]
    assert config["Cmd"] == ["--unix", "/run/osguard/s/server.sock"]
    assert list(config["Volumes"]) == ["/run/osguard"]


@pytest.mark.docker
@needs_image
def test_image_contains_server_xvfb_and_desktop_tools():
    result = _run_in_image(
        "bash", "-c",
        "id -un; id -u; echo $HOME; "
        "python3 -c 'import osguard.server.app, sys; print(osguard.server.app.__file__)'; "
        "ls /opt/osguard/osguard | grep -v __pycache__; "
        "for tool in Xvfb openbox xterm mousepad xdotool wmctrl xauth dbus-daemon socat; do command -v $tool; done; "
        "stat -c '%a %U' /run/osguard /run/osguard/s; "
        "test -x /usr/libexec/at-spi-bus-launcher && echo at-spi; "
        "sudo -n true && echo sudo-ok",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["user", "1000", "/home/user"]
    assert lines[3] == "/opt/osguard/osguard/server/app.py"
    assert sorted(lines[4:6]) == ["__init__.py", "server"]
    assert lines[6] == "/usr/local/bin/Xvfb"  # the wrapper that drops abstract sockets
    assert all(line.startswith("/") for line in lines[7:15])
    # The socket directory: unreadable parent (rm -rf / cannot find it), private child.
    assert lines[15:17] == ["711 root", "700 user"]
    assert lines[-2:] == ["at-spi", "sudo-ok"]


@pytest.mark.docker
@needs_image
def test_pyautogui_and_pyatspi_import_as_user_on_a_display():
    result = _run_in_image(
        "bash", "-c",
        "Xvfb :5 -screen 0 800x600x24 -nolisten tcp >/dev/null 2>&1 & "
        "for i in $(seq 50); do [ -e /tmp/.X11-unix/X5 ] && break; sleep 0.1; done; "
        "xauth -q add :5 . 0123456789abcdef0123456789abcdef; DISPLAY=:5 python -c 'import pyautogui, pyatspi, Xlib; print(pyautogui.size(), Xlib.__version__)'",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Size(width=800, height=600) (0, 33)"


@pytest.mark.docker
@needs_image
def test_dbus_session_config_uses_file_sockets():
    """Host networking shares abstract sockets with the host: the session bus must not use one."""
    result = _run_in_image("grep", "-c", "<listen>unix:tmpdir=", "/usr/share/dbus-1/session.conf")
    assert result.stdout.strip() == "0"


# --------------------------------------------------------------------------- the command

def test_cli_rejects_an_unknown_flavour_before_touching_the_engine(capsys):
    from osguard.cli.app import main

    assert main(["image", "build", "--flavor", "ful"]) == 2
    assert capsys.readouterr().err == "error: unknown image flavour 'ful': expected one of base, full; did you mean 'full'?\n"


@pytest.mark.docker
@needs_image
def test_cli_build_is_a_cache_hit_and_prints_the_tag(capsys):
    from osguard.cli.app import main

    assert main(["image", "build", "-q"]) == 0
    assert capsys.readouterr().out == image_tag("base") + "\n"
    assert main(["image", "build", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["tag"], report["cached"], report["phases"]) == (image_tag("base"), True, {})
    assert main(["image", "list"]) == 0
    assert f"base  {image_tag('base')}  built" in capsys.readouterr().out


@pytest.mark.docker
@needs_image
def test_bootstrapping_debian_needs_root(monkeypatch):
    monkeypatch.setattr(image_build.os, "geteuid", lambda: 1000)
    with pytest.raises(OsguardError) as err:
        image_build.ensure_debian_base(engine_client(), force=True)
    assert str(err.value) == ("bootstrapping the Debian base image needs root (debootstrap); "
                              "run `sudo osguard image build` once")


def _full_skip_reason() -> str | None:
    if _SKIP is not None:
        return _SKIP
    if find_image("full") is None:
        return f"{image_tag('full')} is not built (osguard image build --flavor full)"
    return None


@pytest.mark.docker
@pytest.mark.skipif(_full_skip_reason() is not None, reason=f"docker: {_full_skip_reason()}")
def test_full_flavour_has_the_applications_it_announces():
    image = engine_client().images.get(image_tag("full"))
    apps = image.labels["osguard.apps"].split(",")
    assert apps == ["chrome", "gimp", "libreoffice", "mousepad", "nautilus", "thunderbird", "vlc", "xterm"]
    result = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "bash", image_tag("full"), "-c",
         "for exe in google-chrome chromium gimp libreoffice mousepad nautilus thunderbird vlc xterm ffmpeg; do "
         "command -v $exe >/dev/null && echo $exe; done; echo GTK_MODULES=$GTK_MODULES"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.stdout.split() == ["google-chrome", "chromium", "gimp", "libreoffice", "mousepad", "nautilus",
                                     "thunderbird", "vlc", "xterm", "ffmpeg", "GTK_MODULES=gail:atk-bridge"]


def test_no_engine_says_how_to_start_one(monkeypatch, tmp_path):
    from osguard.providers.docker import DockerProvider

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    expected = (f"no Docker engine answers at unix://{tmp_path}/no-engine.sock (DockerException); "
                "start one with `bash scripts/docker-engine.sh`")
    with pytest.raises(ProviderUnavailable) as err:
        engine_client(timeout=5)
    assert str(err.value) == expected
    assert DockerProvider().available() == expected


def test_provider_options_are_checked_at_construction():
    from osguard.providers.docker import DockerProvider

    with pytest.raises(OsguardError) as err:
        DockerProvider(geometry="big")
    assert str(err.value) == "docker provider: geometry must look like 1920x1080, got 'big'"
    with pytest.raises(OsguardError) as err:
        DockerProvider(flavor="basic")
    assert str(err.value) == "unknown image flavour 'basic': expected one of base, full; did you mean 'base'?"


@pytest.mark.docker
@needs_image
def test_a_failing_build_step_is_reported_with_its_output(monkeypatch, tmp_path):
    """A broken layer must fail the build with the step and its output, and leave no tag."""
    here = Path(image_build.__file__).resolve().parent
    for name in ("Dockerfile.base", "entrypoint.sh", "Xvfb-wrapper.sh"):
        (tmp_path / name).write_bytes((here / name).read_bytes())
    (tmp_path / "Dockerfile.full").write_text("RUN echo osguard-broken-layer && false\n")
    monkeypatch.setattr(image_build, "_HERE", tmp_path)
    tag = image_tag("full")
    with pytest.raises(OsguardError) as err:
        build_image("full")
    message = str(err.value)
    first = message.splitlines()[0]
    assert first.startswith(f"building {tag} failed at step ")
    assert first.endswith(": The command '/bin/sh -c echo osguard-broken-layer && false' "
                          "returned a non-zero code: 1")
    assert "osguard-broken-layer" in message.splitlines()[1:]
    assert find_image("full") is None


@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("debootstrap") is None,
                    reason="needs root and debootstrap (bash scripts/docker-engine.sh installs it)")
def test_unreachable_mirror_fails_the_bootstrap_and_keeps_the_old_base(monkeypatch):
    try:
        client = engine_client()
    except ProviderUnavailable as exc:
        pytest.skip(f"docker: {exc}")
    existing = image_build._image_exists(client, image_build.DEBIAN_BASE_IMAGE)
    before = existing.id if existing is not None else None
    monkeypatch.setenv("OSGUARD_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # discard port: refused
    with pytest.raises(OsguardError) as err:
        image_build.ensure_debian_base(client, force=True)
    assert str(err.value).startswith("debootstrap from http://127.0.0.1:9/debian failed (exit 1):\n")
    if before is not None:
        assert client.images.get(image_build.DEBIAN_BASE_IMAGE).id == before
    assert not list(Path("/var/tmp").glob("osguard-debootstrap-*"))
