"""Helpers shared by the test packages (importable as ``_support``: ``tests/`` is on
``sys.path`` because ``tests/conftest.py`` lives there and ``tests/`` is no package).

Fixtures built on these live in ``tests/conftest.py``; the helpers are here because a
module-level ``skipif`` or a differently scoped fixture needs them at import time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def state_dir(folder: Path) -> Iterator[Path]:
    """Point ``$OSGUARD_STATE_DIR`` at ``folder`` for the block, then restore what was there.

    Keeps test environments' records and homes out of the user's ~/.cache and apart from
    other test modules' environments (``env down --all`` cleans only its own folder).
    """
    previous = os.environ.get("OSGUARD_STATE_DIR")
    os.environ["OSGUARD_STATE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop("OSGUARD_STATE_DIR", None)
        else:
            os.environ["OSGUARD_STATE_DIR"] = previous


def available_provider(name: str) -> Any:
    """The registered provider ``name``; skips the test, with the provider's own reason,
    where it cannot run on this machine."""
    from osguard.providers import get_provider

    provider = get_provider(name)
    reason = provider.available()
    if reason is not None:
        pytest.skip(f"{name} provider not available: {reason}")
    return provider


def docker_skip_reason() -> str | None:
    """Why the Docker tests cannot run here (no engine answers, or the ``base`` image of the
    current sources is not built), or None when they can."""
    from osguard.errors import ProviderUnavailable
    from osguard.images import engine_client, find_image, image_tag

    try:
        client = engine_client(timeout=10)
    except ProviderUnavailable as exc:
        return str(exc)
    if find_image("base", client) is None:
        return f"{image_tag('base')} is not built; run `osguard image build`"
    return None


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie, read straight from /proc (the tests
    judge osguard's clean-up without trusting osguard's own ``pid_alive``)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def failing_start_provider(failing: int = 1, **options: Any) -> Any:
    """A real local provider whose first ``failing`` starts cannot finish in time (a start
    under heavy load, injected by a start-up timeout no sandbox can meet)."""
    from osguard.providers.local import LocalProvider

    class FailingStartProvider(LocalProvider):
        def __init__(self) -> None:
            super().__init__(**options)
            self.failing = failing
            self.starts = 0

        def start(self, *, image: Any = None, timeout: float = 60) -> Any:
            self.starts += 1
            if self.starts <= self.failing:
                return super().start(image=image, timeout=0.001)
            return super().start(image=image, timeout=timeout)

    return FailingStartProvider()


def start_as_built(provider: Any, *, timeout: float = 120) -> Any:
    """A started environment, retried as ``osguard build`` retries it
    (``osguard.builder.build.start_retried``): one that came up without a display its
    provider offers by nature (Xvfb late under load) is stopped and started again; missing
    from every attempt, the start raises (the test errors, never skips)."""
    from osguard.builder.build import start_retried
    from osguard.providers.base import Requirements
    from osguard.providers.nature import provider_nature

    env, _ = start_retried(provider, Requirements(gui=provider_nature(provider).gui), timeout=timeout)
    return env


def start_with_display(provider: Any, *, timeout: float = 120) -> Any:
    """``start_as_built``, skipping only where the provider has no display by nature."""
    from osguard.providers.nature import provider_nature

    nature = provider_nature(provider)
    if not nature.gui:
        pytest.skip("no display here: " + "; ".join(nature.notes))
    return start_as_built(provider, timeout=timeout)


def report_retried(rows) -> None:
    """A row that passed only when replayed alone is a visible warning in the test summary."""
    import warnings

    for row in rows:
        if row.freeze_error:
            warnings.warn(f"{row.variant_id}/{row.reference}: evaluated on an unfrozen commit ({row.freeze_error})",
                          stacklevel=2)
        if row.first_attempts:
            warnings.warn(f"{row.variant_id}/{row.reference} -> {row.status} on a second attempt; "
                          f"first: {' | '.join(row.first_attempts)}", stacklevel=2)
