"""Ready pools: built variants prepared ahead of need, so a reset costs a hand-over.

A reset to a built variant is mostly starting the environment and the application (the
``start:`` steps), not the setup: a template (``osguard.builder.template``) saves the
setup, not the start. ``ReadyPool`` builds the next environments of a variant in
background threads while the caller uses the current one (an agent's episode), so
``take()`` returns one that is ready at once when the episode took longer than a build.

Every environment of the pool is a fresh one, built exactly as ``build_variant`` builds
it (environment started, setup and hazards run or restored from the variant's template,
``start:`` steps run, baseline probed); nothing is shared between two of them. The pool
does not save CPU: it moves the build off the critical path (``bench/results.md``).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from osguard.builder.build import BuiltVariant, build_variant, resolve_provider
from osguard.builder.fork import Ahead
from osguard.errors import BuildError

if TYPE_CHECKING:
    from osguard.providers.base import Provider
    from osguard.spec.model import Variant


class ReadyPool:
    """``size`` built variants of ``variant`` kept ready (or being prepared) in background threads.

    ``take()`` hands out the oldest one (waiting for the rest of its build if needed) and
    at once starts preparing a replacement; a ``BuiltVariant`` handed out is the caller's
    to stop. A build that failed raises its error from the ``take()`` that drew it, and
    from that one only: the replacement is already on its way. ``close()`` (or ``with``)
    stops every environment the pool still holds, waiting for those being prepared.

    Why a waiting environment's baseline is still the right one: the baseline is probed
    when the environment becomes ready, and from then until ``take()`` nothing runs in
    it: no agent has been in it, no step of ours runs, and it is not reachable from any
    other environment (each is its own sandbox or container). Its state at ``take()`` is
    therefore the state it was probed in, as in a build done just before the episode. What
    can change without us is the environment dying (its sandbox or container killed, its
    server gone): ``take()`` asks the environment's server whether it answers
    (``is_alive``, one loopback request) and replaces one that does not by a build done
    there and then (``record["pool"]["discarded"]`` says why). An application that quit
    while its environment answers is not detected here; the episode's own observation
    shows it, as in a fresh build.

    Args:
        variant: the variant to build.
        provider: a provider name or object (as ``build_variant``).
        size: built variants kept ready or being prepared (default 1: one prepared while
            the current one is in use); 0 builds every one on demand in ``take()``.
        hazards: as ``build_variant`` (False: the base task, setup steps only).
        image: as ``build_variant``.
        templates: where the variant is eligible (``template_reason``) and the provider
            can restore templates, restore the setup and hazards from a template made
            once, in the background, before the second build (a template costs an
            environment of its own: worth it from three builds on, so not made when
            ``total`` < 3).
        total: how many built variants will ever be taken (None: no limit); the pool
            prepares no more than that.
        start_timeout: as ``build_variant``.
    """

    def __init__(self, variant: "Variant", provider: "str | Provider", *, size: int = 1, hazards: bool = True,
                 image: str | None = None, templates: bool = True, total: int | None = None,
                 start_timeout: float = 60):
        self.variant = variant
        self.provider = resolve_provider(provider)
        self.hazards = hazards
        self.image = image
        self.templates = templates and (total is None or total >= 3)
        self.start_timeout = start_timeout
        self._template: Any = None
        self._template_tried = False
        self._template_lock = threading.Lock()
        self._builds = 0
        self._count_lock = threading.Lock()
        self._ahead: Ahead[tuple[BuiltVariant, float]] = Ahead(
            self._prepare, size, discard=lambda item: item[0].stop(), name=f"pool-{variant.id}", limit=total)
        self._ahead.top_up()

    @property
    def size(self) -> int:
        """How many are kept ready or being prepared."""
        return self._ahead.size

    def _template_for_build(self) -> Any:
        with self._count_lock:
            self._builds += 1
            first = self._builds == 1
        if not self.templates or first:  # the first build is not delayed by the template's own
            return None
        with self._template_lock:
            if not self._template_tried:
                self._template_tried = True
                from osguard.builder.template import make_template

                try:
                    self._template = make_template(self.variant, self.provider, image=self.image,
                                                   hazards=self.hazards, start_timeout=self.start_timeout)
                except Exception:  # the builds themselves report (or skip) it
                    self._template = None
            return self._template

    def _build(self) -> BuiltVariant:
        return build_variant(self.variant, self.provider, image=self.image, hazards=self.hazards,
                             start_timeout=self.start_timeout, template=self._template_for_build())

    def _prepare(self) -> tuple[BuiltVariant, float]:
        built = self._build()
        return built, time.monotonic()

    def wait(self) -> None:
        """Wait until the built variants being prepared are ready (or failed: a failure is
        the ``take()`` that draws it to report)."""
        self._ahead.wait()

    def take(self) -> BuiltVariant:
        """A ready built variant (waiting for one if none is ready yet); a replacement
        starts preparing at once. ``record["pool"]`` says whether it was prepared ahead
        (``ahead``), how long this call blocked (``wait_s``), how long it had been ready
        (``ready_for_s``) and, when one was found dead and replaced, why (``discarded``).

        Raises:
            BuildError: the pool is closed.
            RequirementsUnmet, BuildError, ProviderUnavailable, EnvironmentError_: the build
                this take drew failed (as ``build_variant``); the pool stays usable.
        """
        started = time.perf_counter()
        if self._ahead.closed:
            raise BuildError(f"ready pool of {self.variant.id}: the pool is closed")
        future = self._ahead.pop()
        if future is None:
            self._ahead.count_one()
        self._ahead.top_up()  # the replacement starts now, whatever this one turns out to be
        discarded = None
        ready_for = 0.0
        if future is None:
            built = self._build()
        else:
            built, ready_at = future.result()
            ready_for = time.monotonic() - ready_at
            try:
                alive = built.env.is_alive()
            except Exception:  # a client that cannot even ask: as good as dead
                alive = False
            if not alive:
                discarded = f"environment {built.env.info.id} stopped answering while it waited in the pool"
                built.stop()
                built = self._build()
        built.record["pool"] = {"ahead": future is not None and discarded is None,
                                "wait_s": round(time.perf_counter() - started, 4),
                                "ready_for_s": round(ready_for, 4), "discarded": discarded}
        return built

    def close(self) -> None:
        """Stop every environment not handed out, waiting for those being prepared."""
        self._ahead.close()
        if self._template is not None:
            self._template.discard()

    def __enter__(self) -> "ReadyPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
