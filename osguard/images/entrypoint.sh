#!/bin/bash
# Entry point of an osguard desktop container (runs as `user`, uid 1000).
#
# The osguard server's session keeper (`python3 -m osguard.server --session`) does the
# real work: Xvfb, D-Bus + AT-SPI, the window manager, the HTTP server, reaping and
# restarting what an agent kills. This wrapper only prepares the runtime directory and
# removes what a committed image may carry over from the container it was taken from
# (X lock files and sockets, bus sockets), which would stop Xvfb from starting.
#
# Arguments are passed on, e.g. `--unix /run/osguard/s/server.sock --geometry 1920x1080`.
export HOME=/home/user USER=user LOGNAME=user
export XDG_RUNTIME_DIR=/run/user/1000
rm -f /tmp/.X*-lock /tmp/.X11-unix/X* 2>/dev/null
rm -rf "${XDG_RUNTIME_DIR:?}"/* /run/osguard/s/* 2>/dev/null
mkdir -p /tmp/.X11-unix "$XDG_RUNTIME_DIR" 2>/dev/null
chmod 1777 /tmp/.X11-unix 2>/dev/null
# Xvfb runs with -ac, so the cookie is never checked; but python-xlib (pyautogui, the
# server's screenshots) warns on every connection when ~/.Xauthority has no entry for
# this host, and the hostname is the host's (host networking), so write one per start.
xauth -q -f "$HOME/.Xauthority" add ":0" . "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" 2>/dev/null
cd "$HOME" || exit 1
exec python3 -m osguard.server --session "$@"
