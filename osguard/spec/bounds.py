"""Value bounds shared by ``osguard validate`` and the code that enforces them.

One constant per bound: the JSON Schema (``osguard.spec.schema``), the loader's semantic
checks and the executors (``osguard.builder.steps``, the generator runner in
``osguard.spec.generators``) all import it from here, so ``validate`` refuses exactly what
``build`` and ``check`` would refuse. Standard library only: importing it is free.
"""

from __future__ import annotations

# ``sleep`` steps: at most a minute, so a typo cannot stall a build for hours.
SLEEP_MAX_SECONDS = 60

# ``activate_window`` waits for the window to appear (a program launched by the previous
# step may still be starting; under load an xterm can take 10+ s to map).
WINDOW_TIMEOUT_DEFAULT_SECONDS = 30
WINDOW_TIMEOUT_MAX_SECONDS = 120

# ``mtime_days_ago`` of written files: a century back at most (further overflows the clock).
MTIME_DAYS_AGO_MAX = 36500

# ``identity: {kind: user}``: regular users' ids, as useradd allows them (login.defs).
USER_UID_MIN = 1000
USER_UID_MAX = 60000

# Generators (``generate`` steps, generated decoy/conflicting files) run on the host in a
# child process with these limits; past any of them the child is killed, never the host.
GENERATOR_CPU_SECONDS = 60
GENERATOR_WALL_SECONDS = 120
GENERATOR_MEMORY_BYTES = 2 * 1024**3
GENERATOR_OUTPUT_BYTES = 32 * 1024**2

# ``wait_for`` steps wait for a window, a window class or a file to appear (or go away):
# the event-driven replacement for fixed sleeps after starting an application. LibreOffice
# cold-starts in 3-15 s on a loaded machine; two minutes at most, so a typo cannot stall a build.
WAIT_FOR_TIMEOUT_DEFAULT_SECONDS = 60
WAIT_FOR_TIMEOUT_MAX_SECONDS = 120
# How often the waiter looks (inside the environment, one process for the whole wait).
WAIT_FOR_INTERVAL_SECONDS = 0.1
# ``settle``: seconds more once a wait's condition holds (a dialog that follows, an animation).
WAIT_FOR_SETTLE_MAX_SECONDS = 10
