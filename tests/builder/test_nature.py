"""Same verdicts under load: a slow or failed environment start is retried, never a skip.

Faults are injected with real parts: the first start of a display environment comes up
headless (what a display server too slow for the session's start-up wait produces), or is
given a start-up time no sandbox can meet (what a start under heavy load produces).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from osguard.builder.build import RequirementsUnmet, build_variant
from osguard.builder.check import check_variants
from osguard.errors import EnvironmentError_
from osguard.providers.base import Requirements
from osguard.providers.local import LocalProvider
from osguard.providers.nature import CapabilityProbeFailed, provider_nature

from _support import failing_start_provider  # noqa: E402

pytestmark = pytest.mark.usefixtures("private_state_dir")


class SlowDisplayProvider(LocalProvider):
    """A local provider whose first ``slow`` starts come up without their display."""

    def __init__(self, slow: int = 1) -> None:
        super().__init__(gui=True)
        self.slow = slow
        self.starts = 0

    def start(self, *, image=None, timeout=60):
        self.starts += 1
        if self.starts <= self.slow:
            return LocalProvider(gui=False).start(image=image, timeout=timeout)
        return super().start(image=image, timeout=timeout)




@pytest.fixture(scope="module")
def rename_variant():
    from pathlib import Path

    from osguard.spec import load_suite

    root = Path(__file__).resolve().parents[2]
    (variant,) = load_suite([root / "variants" / "wrong_target_or_globalized_update" / "os-rename-todo-keep-archive.yaml"])
    return variant


@pytest.fixture
def gui_variant(local_provider, rename_variant):
    import shutil

    if not shutil.which("Xvfb"):
        pytest.skip("needs Xvfb")
    return replace(rename_variant, requires=Requirements(gui=True))


def test_a_display_slow_to_come_up_is_a_retried_start_not_a_skip(gui_variant):
    """Never again: `check --workers 4` reported a gui reference as "skip — requires gui
    (provider lacks it)" because one environment's display answered late, and exited 0."""
    provider = SlowDisplayProvider()
    rows = check_variants([gui_variant], provider, references=["safe"])
    assert [(r.status, r.reference) for r in rows] == [("pass", "safe")], rows[0].detail
    # the headless first start was retried; under load a real start can also come up before
    # its display and be retried in turn (CI, fresh clone of f8226b6: 3 starts), within the bound
    from osguard.builder.build import START_ATTEMPTS

    assert 2 <= provider.starts <= START_ATTEMPTS


def test_a_shell_variant_is_not_run_on_an_environment_that_lost_its_display(local_provider, rename_variant):
    """Never again: a shell variant (no display required) run under CI load came up headless
    and its screenshot-observing episode recorded no screenshot at all. A display the
    provider offers by nature is expected whatever the variant requires."""
    import shutil

    if not shutil.which("Xvfb"):
        pytest.skip("needs Xvfb")
    shell_variant = replace(rename_variant, requires=Requirements())
    provider = SlowDisplayProvider()
    with build_variant(shell_variant, provider) as built:
        assert built.env.capabilities.gui
        (retry,) = built.record["start_retries"]
    assert retry.startswith("attempt 1: the environment came up without gui (")
    assert provider.starts == 2
    # a provider without a display by nature runs it headless, with no retry
    headless = SlowDisplayProvider(slow=0)
    headless.gui = False
    with build_variant(shell_variant, headless) as built:
        assert not built.env.capabilities.gui and "start_retries" not in built.record
    assert headless.starts == 1


def test_a_failed_start_is_retried_with_its_reason_kept(gui_variant):
    """Never again: one start in fifty failing under load became a hole in the results."""
    provider = failing_start_provider(1, gui=True)
    with build_variant(gui_variant, provider) as built:
        retries = built.record["start_retries"]
    assert len(retries) == 1 and retries[0].startswith("attempt 1: ")
    assert provider.starts == 2


def test_starts_that_keep_failing_are_an_error_naming_every_attempt(gui_variant):
    provider = SlowDisplayProvider(slow=5)
    with pytest.raises(EnvironmentError_) as caught:
        build_variant(gui_variant, provider)
    message = str(caught.value)
    assert message.startswith(f"could not start an environment for {gui_variant.id} on provider 'local' in 3 attempts: ")
    assert message.count("the environment came up without gui") == 3
    rows = check_variants([gui_variant], SlowDisplayProvider(slow=5), references=["safe"])
    assert rows[0].status == "error"


def test_only_what_a_provider_lacks_by_nature_is_skipped(local_provider, rename_variant):
    """A skip is only ever 'this provider cannot, by its nature' (no root on local)."""
    needs_root = replace(rename_variant, requires=Requirements(root=True))
    rows = check_variants([needs_root], LocalProvider(), references=["safe"])
    assert rows[0].status == "skip"
    assert rows[0].detail == "requires root (provider 'local' lacks it by nature)"
    with pytest.raises(RequirementsUnmet):
        build_variant(needs_root, LocalProvider())


def test_a_capability_probe_that_cannot_finish_fails_loudly():
    """Never again: a capability probe that was merely slow silently decided the skips."""

    class NoNature:
        name = "stuck"

        def start(self, *, image=None, timeout=60):
            return failing_start_provider(99, gui=True).start(image=image, timeout=timeout)

    with pytest.raises(CapabilityProbeFailed) as caught:
        provider_nature(NoNature(), timeout=5)
    assert str(caught.value).startswith("could not learn what provider 'stuck' offers: its probe environment "
                                        "did not start within 5 s (")


def test_a_new_provider_never_inherits_the_answer_of_a_freed_one():
    """Never again: answers were cached by id(provider); a provider freed by the garbage
    collector handed its id to the next one, which was then told the old provider's nature
    (a probe that could not finish 'passed' with another test's capabilities)."""
    from osguard.providers.base import Capabilities

    class Told:
        def __init__(self, n: int) -> None:
            self.n = n

        def nature(self, image=None):
            return Capabilities(notes=(str(self.n),))

    seen_ids = set()
    for n in range(40):
        provider = Told(n)
        seen_ids.add(id(provider))
        assert provider_nature(provider).notes == (str(n),)
        del provider
    assert len(seen_ids) < 40  # CPython did reuse ids, so the case was exercised


def test_the_default_local_provider_offers_a_display_by_nature(local_provider):
    """Never again: the default provider (gui unset) was taken for headless, so every gui
    reference was skipped."""
    import shutil

    caps = provider_nature(LocalProvider())
    assert caps.gui == bool(shutil.which("Xvfb"))
    assert caps.root is False
    if shutil.which("xterm") and caps.gui:
        assert "xterm" in caps.apps
