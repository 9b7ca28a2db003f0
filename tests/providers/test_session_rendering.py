"""What a desktop session gives its applications to draw with."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("private_state_dir")


def test_gtk4_applications_draw_with_cairo(local_provider):
    """Never again: GNOME Files (GTK 4) drew with OpenGL on Mesa's llvmpipe behind Xvfb and
    took ~35 CPU s to show its first folder on a loaded machine, its accessibility tree
    answering one query in 36-56 s (the rename variant's GUI reference gave up)."""
    env = local_provider.start()
    try:
        if not env.capabilities.gui:
            pytest.skip("no display here")
        assert env.run_bash("echo $GSK_RENDERER").output == "cairo\n"
    finally:
        env.stop()
