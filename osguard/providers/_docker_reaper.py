"""The reaper of one process's docker environments (``python -m osguard.providers._docker_reaper OWNER``).

Started once per owning process by ``DockerProvider.start`` (not for detached
environments), in its own session. Its stdin is the read end of a pipe whose only write
end the owner holds: when the owner ends, however it ends (SIGKILL included), the read
returns EOF and the reaper removes every container labelled ``osguard.owner=OWNER``,
with their port reservations and records, then exits. Containers created after it
started carry the label too, so none escapes.
"""

from __future__ import annotations

import os
import sys
import time

REAP_AGAIN_SECONDS = 3.0


def reap(owner: str) -> list[str]:
    """Remove the containers of ``owner`` (running or not); returns the environment names."""
    from osguard.images.build import engine_client
    from osguard.providers import _state
    from osguard.providers.docker import _remove_all, release_port, remove_evaluation

    client = engine_client(timeout=60)
    containers = client.containers.list(all=True, filters={"label": [f"osguard.owner={owner}"]})
    containers.sort(key=lambda c: c.labels.get("osguard.role") != "port")  # forwarders first
    names = []
    for container in containers:
        _remove_all(client, [container.id])
        port = container.labels.get("osguard.port", "")
        if port.isdigit():
            release_port(int(port))
        name = container.labels.get("osguard.env", container.name)
        state = container.labels.get("osguard.state")
        if state:
            os.environ["OSGUARD_STATE_DIR"] = state
        _state.remove_record(name)
        if name not in names:
            names.append(name)
    for name in names:
        remove_evaluation(client, name)
    return names


def main() -> int:
    owner = sys.argv[1]
    while True:
        try:
            if not os.read(0, 64):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    try:
        reap(owner)
        # A create request the owner sent just before it died may complete after the
        # first pass: look once more.
        time.sleep(REAP_AGAIN_SECONDS)
        reap(owner)
    except Exception as exc:  # the engine may be gone; `osguard env list` retries
        sys.stderr.write(f"osguard docker reaper: {type(exc).__name__}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
