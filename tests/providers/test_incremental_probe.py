"""Incremental probes (the host view's stat cache): a per-step probe that re-reads only the
files whose lstat changed must give exactly the State a full probe gives, whatever the
agent does to the home. Real local sandboxes; the mutations run inside them."""

from __future__ import annotations

import json
import random
import time

import pytest

from _support import available_provider
from osguard.builder.probe import probe
from osguard.invariants.types import ProbeRequest

pytestmark = pytest.mark.usefixtures("private_state_dir")

TOKENS = ("OSG-INCR-TOKEN-1", "second-secret")
FILES = [f"d{d}/f{f:02}.txt" for d in range(6) for f in range(40)]
RACY_S = 2.1  # files are reused only once their ctime is older than the probe's 2 s window


@pytest.fixture(scope="module")
def env():
    environment = available_provider("local").start()
    yield environment
    environment.stop()


def _sh(env, script: str) -> None:
    result = env.run_bash(script, timeout=300)
    assert result.returncode == 0, result.output


def _incremental(env) -> dict:
    return probe(env, ProbeRequest(roots=("~/w",), tokens=TOKENS))


def _full(env) -> dict:
    return probe(env, ProbeRequest(roots=("~/w",), tokens=TOKENS, extra={"incremental": False}))


def _canonical(state: dict) -> str:
    state = dict(state)
    state.pop("elapsed_s")
    return json.dumps(state)  # insertion order kept: byte-identical, not merely equal


def _mutations(rng: random.Random, round_: int) -> str:
    """A bash script of random agent actions, each one a way to change content or
    metadata that a naive stat cache would miss or mis-attribute."""
    lines = ["set -e", "cd ~/w"]
    for index in range(12):
        a, b = rng.sample(FILES, 2)
        kind = rng.choice(["content_mtime_reset", "token_mtime_reset", "rename_over", "replace_same_size",
                           "chmod", "symlink_swap", "swap_pair", "append", "utime_only"])
        guard = f'[ -f {a} ] && [ ! -L {a} ] && [ -f {b} ] && [ ! -L {b} ]'
        if kind == "content_mtime_reset":  # same size, same mtime: only ctime tells
            lines.append(f"if {guard}; then touch -r {a} /tmp/ref; printf 'Z{round_}' | "
                         f"dd of={a} bs=1 seek=3 conv=notrunc 2>/dev/null; touch -r /tmp/ref {a}; fi")
        elif kind == "token_mtime_reset":  # the token search must see the new content
            token = TOKENS[index % 2]
            lines.append(f"if {guard}; then touch -r {a} /tmp/ref; printf '{token}' | "
                         f"dd of={a} bs=1 seek=0 conv=notrunc 2>/dev/null; touch -r /tmp/ref {a}; fi")
        elif kind == "rename_over":  # b's path now holds a's inode
            lines.append(f"if {guard}; then mv {a} {b}; fi")
        elif kind == "replace_same_size":  # a new inode, same size, same mtime
            lines.append(f"if {guard}; then head -c $(stat -c %s {a}) /dev/urandom > /tmp/new; "
                         f"touch -r {a} /tmp/new; mv /tmp/new {a}; fi")
        elif kind == "chmod":
            lines.append(f"if {guard}; then chmod {rng.choice(['600', '640', '444', '000'])} {a}; fi")
        elif kind == "symlink_swap":
            lines.append(f"if {guard}; then rm {a}; ln -s {b} {a}; fi")
        elif kind == "swap_pair":  # two files trade places (inodes swap)
            lines.append(f"if {guard}; then mv {a} /tmp/t; mv {b} {a}; mv /tmp/t {b}; fi")
        elif kind == "append":
            lines.append(f"if {guard}; then echo more >> {a}; fi")
        else:  # metadata only: the content (and its hash) stays
            lines.append(f"if {guard}; then touch -d '2001-02-03 04:05:06' {a}; fi")
    return "\n".join(lines)


def test_incremental_probes_equal_full_probes_under_random_mutations(env) -> None:
    """Regression: a per-step probe must never reuse a digest (or token hits) of a file
    whose content, inode, mode or type changed, even when its size and mtime were put
    back; it must give byte-identical States to a full probe. Before, every step re-read
    the whole home (no cache: nothing reused)."""
    files = " ".join(FILES)
    _sh(env, f"mkdir -p ~/w/d0 ~/w/d1 ~/w/d2 ~/w/d3 ~/w/d4 ~/w/d5 && cd ~/w && "
             f"for f in {files}; do head -c $((RANDOM % 3000 + 200)) /dev/urandom > $f; done && "
             f"printf 'x {TOKENS[0]} y' > d0/f00.txt")
    time.sleep(RACY_S)
    baseline = _incremental(env)
    view = env.trusted_view()
    assert view.last_reused == 0
    assert _canonical(baseline) == _canonical(_full(env))
    assert baseline["tokens"][TOKENS[0]] == ["/home/user/w/d0/f00.txt"]

    rng = random.Random(16)
    for round_ in range(4):
        _sh(env, _mutations(rng, round_))
        step = _incremental(env)
        reused = view.last_reused
        full = _full(env)
        assert _canonical(step) == _canonical(full), f"round {round_}"
        # Most of the home was unchanged and older than the racy window: it was reused.
        assert reused > len(FILES) // 2, f"round {round_}: only {reused} reused"
        time.sleep(RACY_S)


def test_a_file_changed_right_after_the_baseline_is_read_again(env) -> None:
    """Regression: a file written in the same clock tick as the stat the cache holds must
    never be served from the cache (git's "racily clean" entries): a file changed within
    the racy window of a probe is not cached by that probe."""
    _sh(env, "mkdir -p ~/r && cd ~/r && for i in 1 2 3; do echo old$i > f$i; done")
    request = ProbeRequest(roots=("~/r",))
    first = probe(env, request)  # f1..f3 were written less than 2 s ago: not cached
    _sh(env, "cd ~/r && touch -r f1 /tmp/ref && echo new1 > f1 && touch -r /tmp/ref f1")
    second = probe(env, request)
    assert env.trusted_view().last_reused == 0
    assert second["files"]["/home/user/r/f1"]["hash"] != first["files"]["/home/user/r/f1"]["hash"]
    assert _canonical(second) == _canonical(probe(env, ProbeRequest(roots=("~/r",), extra={"incremental": False})))


# One file per way a change can hide from a naive stat cache: (name, what the agent does,
# which field of the file's State entry must differ from the baseline's).
HIDDEN_CHANGES = [
    ("same_size_same_mtime", "touch -r f /tmp/ref; printf XY | dd of=f bs=1 seek=2 conv=notrunc 2>/dev/null; "
                             "touch -r /tmp/ref f", "hash"),
    ("inode_swap", "head -c $(stat -c %s f) /dev/urandom > /tmp/n; touch -r f /tmp/n; mv /tmp/n f", "hash"),
    ("chmod", "chmod 600 f", "mode"),
    ("chmod_and_back_with_new_content", "touch -r f /tmp/ref; chmod 600 f; printf QQ | dd of=f bs=1 seek=0 "
                                        "conv=notrunc 2>/dev/null; chmod 644 f; touch -r /tmp/ref f", "hash"),
    # the link outside the probed folder (the same filesystem: /tmp is another mount)
    ("written_through_a_hard_link", "mkdir -p ~/links && ln f ~/links/l && touch -r f /tmp/ref && printf ZZ | "
                                    "dd of=$HOME/links/l bs=1 seek=1 conv=notrunc 2>/dev/null && touch -r /tmp/ref f "
                                    "&& rm ~/links/l", "hash"),
    ("replaced_by_a_symlink", "rm f; ln -s /etc/hostname f", "type"),
]


@pytest.mark.parametrize("name, script, field", HIDDEN_CHANGES, ids=[c[0] for c in HIDDEN_CHANGES])
def test_each_hidden_change_is_seen_by_the_next_incremental_probe(env, name, script, field) -> None:
    """Regression: an incremental probe must never serve a cached digest for a file whose
    content, inode, mode or type changed while its size and mtime were put back (a rewrite
    in place, an inode swap, a chmod, a write through a hard link elsewhere, a symlink in
    its place): the step's entry must differ from the baseline's and equal a full probe's."""
    folder = f"~/hidden-{name}"
    _sh(env, f"mkdir -p {folder} && cd {folder} && head -c 3000 /dev/urandom > f && chmod 644 f && "
             f"for i in 1 2 3 4 5; do head -c 500 /dev/urandom > other$i; done")
    time.sleep(RACY_S)
    request = ProbeRequest(roots=(folder,))
    baseline = probe(env, request)
    path = f"/home/user/hidden-{name}/f"
    _sh(env, f"set -e; cd {folder}; {script}")
    time.sleep(RACY_S)  # past the racy window: only the stat row may tell the change now
    step = probe(env, request)
    assert env.trusted_view().last_reused == 5  # the untouched files came from the cache
    assert step["files"][path][field] != baseline["files"][path][field]
    assert _canonical(step) == _canonical(probe(env, ProbeRequest(roots=(folder,), extra={"incremental": False})))
