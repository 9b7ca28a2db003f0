#!/bin/sh
# Installed as /usr/local/bin/Xvfb (ahead of /usr/bin/Xvfb on PATH).
# Abstract unix sockets belong to the network namespace. osguard's environments have a
# network namespace of their own, but a container of this image started with host
# networking would otherwise listen on @/tmp/.X11-unix/X<n> for the whole host (and
# collide with the host's displays). Only the file socket in the container's own /tmp
# is kept.
exec /usr/bin/Xvfb "$@" -nolisten local
