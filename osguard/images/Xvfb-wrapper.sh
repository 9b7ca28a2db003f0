#!/bin/sh
# Installed as /usr/local/bin/Xvfb (ahead of /usr/bin/Xvfb on PATH).
# Containers share the host's network namespace, and abstract unix sockets belong to
# the network namespace: by default Xvfb would listen on @/tmp/.X11-unix/X<n>, visible
# to the host and to every other container (and colliding with their displays). Only
# the file socket in the container's own /tmp is kept.
exec /usr/bin/Xvfb "$@" -nolisten local
