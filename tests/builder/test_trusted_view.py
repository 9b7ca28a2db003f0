"""The trusted state view: what the sandbox plants under the roots (links to host files,
FIFOs, huge trees, huge files) is recorded, never read through, never hangs the probe,
and is bounded with a clear error. Real local sandboxes and real containers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from _support import available_provider, docker_skip_reason
from osguard.builder.probe import probe
from osguard.invariants.types import ProbeRequest
from osguard.providers.base import ExecResult

pytestmark = pytest.mark.usefixtures("private_state_dir")


@pytest.fixture(scope="module", params=["local", "docker"])
def env(request):
    if request.param == "docker":
        reason = docker_skip_reason()
        if reason:
            pytest.skip(reason)
    environment = available_provider(request.param).start()
    yield environment
    environment.stop()


def _sh(env, script: str) -> None:
    result = env.run_bash(script, timeout=300)
    assert result.returncode == 0, result.output


def test_links_to_host_files_are_recorded_as_links_and_never_read(env, local_provider) -> None:
    """Regression: the judge must never read through a link the agent planted: not to the
    host's /etc/shadow, the Docker socket, another environment's home, nor through a
    linked folder on the way to a protected path. Before, links were followed (a root
    under a linked folder was read through it; a config behind a link was opened)."""
    other = local_provider.start()
    try:
        secret = "OSG-OTHER-ENV-SECRET-7f3a"
        _sh(other, f"echo {secret} > ~/secret.txt")
        other_home = other.info.extra["home_dir"]
        _sh(env, "mkdir -p ~/d && cd ~/d && ln -s /etc/shadow shadow && ln -s /var/run/docker.sock docker "
                 f"&& ln -s {other_home}/secret.txt other && ln -s /etc ~/etcl")
        state = probe(env, ProbeRequest(
            roots=("~/d", "~/etcl/passwd"),
            configs=(("~/d/shadow", "text"), ("~/d/docker", "text"), ("~/d/other", "text"),
                     ("~/etcl/passwd", "passwd")),
            tokens=(secret, "root:")))
    finally:
        other.stop()
    assert state["trusted"] is True
    for name, target in (("shadow", "/etc/shadow"), ("docker", "/var/run/docker.sock"),
                         ("other", f"{other_home}/secret.txt")):
        entry = state["files"][f"/home/user/d/{name}"]
        assert (entry["type"], entry["target"], entry["hash"]) == ("symlink", target, None)
        assert state["configs"][f"/home/user/d/{name}"]["text"] == {"data": None,
                                                                   "error": "not a regular file: symlink"}
    assert state["roots"]["/home/user/etcl/passwd"] is False
    assert state["files"]["/home/user/etcl"]["type"] == "symlink"
    assert "/home/user/etcl/passwd" not in state["files"]
    assert state["configs"]["/home/user/etcl/passwd"]["passwd"] == {
        "data": None, "error": "not a regular file: symlink on the way (/home/user/etcl)"}
    assert state["tokens"] == {secret: [], "root:": []}
    assert "not followed: /home/user/etcl is a symlink on the way to /home/user/etcl/passwd" in state["errors"]


def test_a_fifo_under_the_roots_never_blocks_the_probe(env) -> None:
    """Regression: a FIFO planted where the judge reads a config (or under a root) made the
    probe block on open() until its timeout, so the episode became env_error. A FIFO must
    be recorded as such and never opened."""
    _sh(env, "mkdir -p ~/p && mkfifo ~/p/settings.json && mkfifo /tmp/pipe")
    started = time.monotonic()
    state = probe(env, ProbeRequest(roots=("~/p", "/tmp/pipe"), configs=(("~/p/settings.json", "json"),)),
                  timeout=20)
    assert time.monotonic() - started < 15
    assert state["files"]["/home/user/p/settings.json"]["type"] == "other"
    assert state["files"]["/tmp/pipe"]["type"] == "other"
    assert state["configs"]["/home/user/p/settings.json"]["json"] == {"data": None,
                                                                      "error": "not a regular file: fifo"}


def test_a_5_gb_sparse_file_is_recorded_unhashed_with_a_clear_error(local_provider) -> None:
    """Regression: a 5 GB (sparse) file under the roots was read to the end to hash it,
    with sha256 inside the sandbox (minutes under load: the probe timed out). It must be
    recorded (type, mode, size) and left unhashed with an error naming the bound."""
    with local_provider.start() as env:
        _sh(env, "mkdir -p ~/big && truncate -s 5G ~/big/disk.img && echo small > ~/big/small.txt")
        started = time.monotonic()
        state = probe(env, ProbeRequest(roots=("~/big",), configs=(("~/big/disk.img", "text"),)), timeout=60)
        elapsed = time.monotonic() - started
    entry = state["files"]["/home/user/big/disk.img"]
    assert (entry["type"], entry["size"], entry["hash"]) == ("file", 5 << 30, None)
    assert state["files"]["/home/user/big/small.txt"]["hash"] is not None
    assert state["hash_algo"] == "xxh3_128"
    assert ("not hashed: /home/user/big/disk.img is larger than the probe's per-file bound "
            "(5368709120 bytes > 536870912)") in state["errors"]
    assert state["configs"]["/home/user/big/disk.img"]["text"] == {"data": None,
                                                                   "error": "unreadable: too large: 5368709120 bytes (limit 1048576)"}
    assert elapsed < 10


@pytest.mark.slow  # creating the files takes a while on a loaded machine
def test_a_huge_tree_is_bounded_with_a_clear_error(local_provider) -> None:
    """Regression: a tree of 10^6 files under a root must never hang or exhaust the judge:
    the walk stops at its entry bound (200,000), says so, and still records the other
    roots. 300,000 files here (1.5 times the bound: the walk past the bound is what is
    tested, and a million took 48 s of CI)."""
    with local_provider.start() as env:
        _sh(env, "echo keep > ~/notes.txt && /usr/bin/python3 -c \"import os\n"
                 "os.makedirs('/home/user/many')\n"
                 "for i in range(300000):\n    os.close(os.open('/home/user/many/%d' % i, os.O_CREAT | os.O_WRONLY))\"")
        started = time.monotonic()
        state = probe(env, ProbeRequest(roots=("~/notes.txt", "~/many")), timeout=120)
        elapsed = time.monotonic() - started
    assert state["trusted"] is True
    assert "truncated: more than 200000 entries under the roots" in state["errors"]
    assert len(state["files"]) == 200000  # the bound: notes.txt, many/ and 199,998 of its files
    assert state["files"]["/home/user/notes.txt"]["type"] == "file"
    assert elapsed < 60


def test_the_access_watcher_sees_reads_through_any_path_and_not_the_probe(env) -> None:
    """The ``not_accessed`` data: opens and reads of a watched file through a symlink, a
    hard link and a copy are recorded from outside (fanotify on the host); osguard's own
    probe reads (it hashes the same file) never are."""
    _sh(env, "mkdir -p ~/w && echo TOPSECRET > ~/w/secret.txt && echo hi > ~/w/other.txt")
    request = ProbeRequest(roots=("~/w",), watch=("~/w/secret.txt",))
    baseline = probe(env, request)
    assert baseline["accesses"] == {"/home/user/w/secret.txt": []}
    assert baseline["accesses_error"] is None
    quiet = probe(env, request)  # only osguard read it meanwhile
    assert quiet["accesses"] == {"/home/user/w/secret.txt": []}
    _sh(env, "cat ~/w/other.txt >/dev/null")
    assert probe(env, request)["accesses"] == {"/home/user/w/secret.txt": []}
    _sh(env, "cd ~/w && ln -s secret.txt link && ln secret.txt hard && cat link > /dev/null "
             "&& tail -c 3 hard > /dev/null && cp secret.txt /tmp/copy")
    final = probe(env, request)
    events = final["accesses"]["/home/user/w/secret.txt"]
    assert final["accesses_error"] is None
    # "by" is the reader's name when it is still alive to be named (best effort).
    assert {e["by"] for e in events} <= {"cat", "tail", "cp", None}
    assert {e["event"] for e in events} == {"open", "read"}


def test_success_getters_read_through_the_view_and_never_through_a_link(env, tmp_path) -> None:
    """Regression: ``vm_file`` read whatever a planted link pointed at (the server follows
    links); through the evaluation view a link is no file (the getter gives None, as for a
    missing file) and ``list_directory`` lists exactly what the server lists."""
    from osguard.evaluators.getters import GetterContext, get_getter
    from osguard.providers.view import evaluation_env

    _sh(env, "mkdir -p ~/g/sub && echo data > ~/g/report.txt && touch ~/g/sub/x && ln -s /etc/passwd ~/g/link "
             "&& ln -s /etc ~/g/etc")
    ctx = GetterContext(env=evaluation_env(env), cache_dir=tmp_path)
    vm_file = get_getter("vm_file")
    assert Path(vm_file(ctx, {"type": "vm_file", "path": "/home/user/g/report.txt", "dest": "r.txt"})).read_text() \
        == "data\n"
    assert vm_file(ctx, {"type": "vm_file", "path": "/home/user/g/link", "dest": "l.txt"}) is None
    assert vm_file(ctx, {"type": "vm_file", "path": "/home/user/g/etc/passwd", "dest": "p.txt"}) is None
    listing = get_getter("list_directory")
    assert listing(ctx, {"type": "list_directory", "path": "/home/user/g"}) == env.list_directory("/home/user/g")
    assert ctx.env.execute("cat ~/g/report.txt; echo $PATH", shell=True).output == \
        "data\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_an_evaluation_command_is_never_an_access_of_a_watched_file(provider) -> None:
    """Regression: on docker, running an evaluation command (a ``command`` invariant or
    success check) commits the container, and the engine's reads of the home for that
    commit were recorded as reads of a watched file "by an unknown process": every
    ``not_accessed`` invariant of a variant that also had a command check was violated
    even by a run that did nothing. osguard's own evaluation reads are never the agent's."""
    from osguard.providers.view import evaluation_env

    if provider == "docker" and docker_skip_reason():
        pytest.skip(docker_skip_reason())
    env = available_provider(provider).start()  # its own: the watch list is fixed at the first probe
    try:
        _sh(env, "mkdir -p ~/e && echo TOPSECRET > ~/e/secret.txt")
        request = ProbeRequest(roots=("~/e",), watch=("~/e/secret.txt",))
        assert probe(env, request)["accesses"] == {"/home/user/e/secret.txt": []}
        assert evaluation_env(env).execute("ls ~/e", shell=True).output == "secret.txt\n"
        final = probe(env, request)
        assert final["accesses_error"] is None
        assert final["accesses"] == {"/home/user/e/secret.txt": []}
        _sh(env, "cat ~/e/secret.txt > /dev/null")  # the watcher still sees the agent's reads after it
        assert {e["event"] for e in probe(env, request)["accesses"]["/home/user/e/secret.txt"]} == {"open", "read"}
    finally:
        env.stop()


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_an_evaluation_command_sees_the_home_and_tmp_as_the_agent_left_them(provider) -> None:
    """An evaluation command (a ``command`` invariant or success check) reads the home and
    /tmp as they are: a file the image had and the agent deleted stays deleted (docker's
    evaluation container gets fresh volumes, never the image's own home), owners and modes
    are kept; on docker the command's own writes never reach the environment."""
    from osguard.providers.view import evaluation_env

    if provider == "docker" and docker_skip_reason():
        pytest.skip(docker_skip_reason())
    env = available_provider(provider).start()
    try:
        _sh(env, "touch ~/.profile && rm ~/.profile && mkdir -p ~/e && echo v1 > ~/e/a.txt && chmod 600 ~/e/a.txt "
                 "&& echo t > /tmp/t.txt")
        probe(env, ProbeRequest(roots=("~/e",)))
        evaluation = evaluation_env(env)
        seen = evaluation.execute("ls -A ~ | grep -cx .profile; cat ~/e/a.txt; stat -c '%U %a' ~/e/a.txt; "
                                  "cat /tmp/t.txt", shell=True)
        assert seen.output == "0\nv1\nuser 600\nt\n", seen
        if provider == "docker":  # local binds the environment's own home (docs/invariants.md)
            evaluation.execute("echo changed > ~/e/a.txt; rm -f /tmp/t.txt", shell=True)
            assert env.run_bash("cat ~/e/a.txt /tmp/t.txt", timeout=30).output == "v1\nt\n"
    finally:
        env.stop()


COUNT_SLEEPS = ("/usr/bin/python3 -c \"import os; print(sum(open('/proc/%s/cmdline' % p, 'rb').read() == "
                "b'sleep\\x00301\\x00' for p in os.listdir('/proc') if p.isdigit()))\"")


def test_docker_evaluation_commands_time_out_and_leave_nothing_running() -> None:
    """The commands of one evaluation share one container on docker: a command past its
    timeout is reported timed out (and the next one still runs), and whatever a command
    left running is killed before the next starts."""
    from osguard.providers.view import evaluation_env

    if docker_skip_reason():
        pytest.skip(docker_skip_reason())
    env = available_provider("docker").start()
    try:
        evaluation = evaluation_env(env)
        started = time.monotonic()
        slow = evaluation.execute("sleep 60", shell=True, timeout=2)
        assert slow.timed_out and not slow.ok, slow
        assert time.monotonic() - started < 30
        left = evaluation.execute("nohup sleep 301 >/dev/null 2>&1 & " + COUNT_SLEEPS, shell=True)
        assert left.output == "1\n", left
        assert evaluation.execute(COUNT_SLEEPS, shell=True).output == "0\n"
        assert evaluation.execute("id -u; exit 3", shell=True) == ExecResult(3, "1000\n", "")
    finally:
        env.stop()


def test_an_agent_process_left_running_is_frozen_while_the_evaluation_commits() -> None:
    """Regression (known gap of the watcher fix): the access watcher is quiet while the
    evaluation commit reads the home through the engine, so a process the agent left
    running could read a watched file unseen in that window (or write while the home is
    copied). The container is paused for the whole commit: a background loop stamping the
    clock every 10 ms leaves no stamp inside the commit's window, and runs again after."""
    from osguard.providers.view import trusted_view_of

    if docker_skip_reason():
        pytest.skip(docker_skip_reason())
    env = available_provider("docker").start()
    try:
        _sh(env, "mkdir -p ~/e && echo TOPSECRET > ~/e/secret.txt")
        request = ProbeRequest(roots=("~/e",), watch=("~/e/secret.txt",))
        probe(env, request)
        env.run_bash("nohup sh -c 'while :; do date +%s%N >> /tmp/stamps; sleep 0.01; done' >/dev/null 2>&1 &",
                     timeout=30)
        time.sleep(0.5)
        view = trusted_view_of(env)
        start = time.time_ns()
        view._image()  # the commit an evaluation command makes first
        end = time.time_ns()
        assert view.freeze_error is None, view.freeze_error
        time.sleep(0.5)
        stamps = [int(x) for x in env.run_bash("cat /tmp/stamps", timeout=30).output.split()]
        # The loop stamps every ~10 ms (more slowly on a loaded machine); paused, it stamps
        # nothing. The pause and unpause calls take their own time inside the window (seen:
        # 4 stamps in the first tenths of a second with the machine at load 30), so the
        # criterion is the longest silence over the window: most of the commit.
        window = end - start
        assert window > 100_000_000, "the commit was too quick to show anything"
        around = [start] + [s for s in stamps if start < s < end] + [end]
        silence = max(b - a for a, b in zip(around, around[1:]))
        assert silence > window // 2, (
            f"{len(around) - 2} stamps while the commit ran ({window / 1e9:.2f} s), longest silence {silence / 1e9:.2f} s")
        assert any(s < start for s in stamps) and any(s > end for s in stamps)
    finally:
        env.stop()


def test_a_refused_freeze_reaches_the_evaluation_record_and_the_check_row(capsys) -> None:
    """Regression: when the engine refused the pause every time, the evaluation commit ran
    unfrozen and nothing downstream said so (``freeze_error`` stayed on the view). The
    refusal is real: the environment's container has stopped, and the engine refuses to
    pause a container that is not running. The commit is still made, and the error reaches the evaluation record (``evaluation.freeze_error`` of outcome.json, from
    ``EvaluationResult.to_json``), the check row's JSON and the check's text output."""
    import re

    from osguard.builder.build import with_freeze_error
    from osguard.builder.check import _Job, judge
    from osguard.cli.build_cmds import _print_rows
    from osguard.evaluators import EvaluationResult
    from osguard.outcomes import Outcome
    from osguard.providers.view import evaluation_env, trusted_view_of
    from osguard.spec import load_suite

    if docker_skip_reason():
        pytest.skip(docker_skip_reason())
    env = available_provider("docker").start()
    try:
        _sh(env, "mkdir -p ~/e && echo KEPT > ~/e/kept.txt")
        view = trusted_view_of(env)
        frozen = EvaluationResult(outcome=Outcome.TASK_FAILURE, success=False, success_detail="", verdicts=(),
                                  violated=())
        assert "freeze_error" not in with_freeze_error(frozen, env).to_json()  # nothing refused yet
        view.client.api.kill(view.container_id)
        view.client.api.wait(view.container_id, timeout=60)
        # the evaluation's first command makes the commit (its home, a tmpfs of the running
        # container, is gone once it stopped: what matters here is the refusal, not the files)
        served = evaluation_env(env).execute("true", shell=True)
        assert not served.timed_out, served
        cid = view.container_id
        pattern = (r"could not pause the container for the evaluation commit: 409 Client Error for \S+/containers/"
                   + cid + r"/pause: Conflict \(\"[Cc]ontainer " + cid + r" is not running\"\)")
        assert re.fullmatch(pattern, view.freeze_error or ""), view.freeze_error
        record = with_freeze_error(frozen, env).to_json()
        assert record["freeze_error"] == view.freeze_error
        (variant,) = [v for v in load_suite(None) if v.id == "os-rename-todo-keep-archive"]
        row = judge(_Job(variant, "noop", ()), with_freeze_error(frozen, env))
        assert (row.status, row.to_json()["freeze_error"]) == ("pass", view.freeze_error)
        _print_rows([row], "docker", 1.0)
        assert (f"WARNING os-rename-todo-keep-archive/noop: evaluated on an unfrozen commit ({view.freeze_error})\n"
                in capsys.readouterr().out)
    finally:
        env.stop()


@pytest.mark.parametrize("fanotify", [True, False], ids=["fanotify", "inotify"])
def test_the_watcher_on_host_files_sees_reads_and_drops_its_own(tmp_path, fanotify) -> None:
    """Both watcher backends on real host files: a read through a symlink is recorded; a
    read inside ``quiet()`` (osguard's own, where no pid tells it apart) is not."""
    from osguard.providers.view import AccessWatcher, probe_script

    if fanotify and os.geteuid() != 0:
        pytest.skip("fanotify needs root")
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "link").symlink_to("secret")
    tree = probe_script().Tree({"map": {"/home/user": str(tmp_path)}}, "/home/user")
    watcher = AccessWatcher.start(tree, ["/home/user/secret", "/home/user/link"], use_fanotify=fanotify)
    try:
        assert watcher.error == "not watched: /home/user/link: a symlink, never followed"
        with watcher.quiet():
            (tmp_path / "secret").read_text()
        assert watcher.snapshot(["/home/user/secret"]) == ({"/home/user/secret": []}, watcher.error)
        watcher.exclude.discard(os.getpid())  # this test process plays the agent now
        (tmp_path / "link").read_text()
        events, _ = watcher.snapshot(["/home/user/secret"])
        assert {e["event"] for e in events["/home/user/secret"]} == {"open", "read"}
    finally:
        watcher.stop()


def test_a_tampered_inside_probe_is_an_inside_error_not_a_default(env) -> None:
    """Regression: the clipboard can only be read inside; a sabotaged interpreter there
    (a usercustomize that exits) made the whole probe fail before. Now the outside view
    still reads every file, and the clipboard is None with the reason in
    ``inside_errors``: never "" (which a disclosure check would read as clean)."""
    _sh(env, "mkdir -p ~/.local/lib/python3.11/site-packages ~/c && echo kept > ~/c/f "
             "&& echo 'import os; os._exit(0)' > ~/.local/lib/python3.11/site-packages/usercustomize.py")
    state = probe(env, ProbeRequest(roots=("~/c",), clipboard=True))
    assert state["files"]["/home/user/c/f"]["type"] == "file"
    assert state["clipboard"] is None
    assert state["inside_errors"]["clipboard"].startswith(
        f"clipboard probe inside failed: probe in environment {env.info.id} failed (exit 0)")
    _sh(env, "rm ~/.local/lib/python3.11/site-packages/usercustomize.py")


def test_without_a_view_the_probe_runs_inside_and_says_it_is_untrusted(env) -> None:
    """An environment that offers no view (an OSWorld VM; here the same server reached by a
    plain client) is probed inside, and the State says so; a watch cannot be kept there."""
    from osguard.providers.client import HttpEnvironment

    plain = HttpEnvironment(env.endpoint, env.info, env.capabilities)
    try:
        state = probe(plain, ProbeRequest(roots=("~/c",), watch=("~/c/f",)))
    finally:
        plain.stop()
    assert (state["trusted"], state["view"], state["inside_errors"]) == (False, "inside", {})
    assert state["accesses"] == {}
    assert state["accesses_error"] == "no access watcher: this provider offers no view from outside the environment"


def test_git_search_line_index_and_xcu_run_in_the_trusted_view(env) -> None:
    """Regression: the host-side probe drops to the sandbox's uid before reading; modules the
    readers import lazily (hashlib, zlib for git objects and line hashes, the XML parser for
    xcu) then failed to load from a root-only interpreter prefix, and every variant with a
    `not_in_git_objects` invariant ended in "No module named 'hashlib'". They must load."""
    token = "osg-view-git-token-9c41e2b7"
    _sh(env, "mkdir -p ~/gv && cd ~/gv && git init -q && git config user.email a@b && git config user.name a "
             f"&& echo {token} > t.txt && git add t.txt && git commit -q -m one && echo 'alpha\nbeta' > lines.txt "
             "&& printf '<?xml version=\"1.0\"?>\\n<oor:items xmlns:oor=\"http://openoffice.org/2001/registry\">"
             "</oor:items>\\n' > r.xcu")
    state = probe(env, ProbeRequest(roots=("~/gv",), git=("~/gv",), tokens=(token,), lines=("~/gv",),
                                    configs=(("~/gv/r.xcu", "xcu"),)))
    git = state["git"]["/home/user/gv"]
    assert git.get("error") is None, git
    assert len(git["hits"][token]) >= 1
    assert len(state["lines"]["/home/user/gv/lines.txt"]) == 2
    assert state["configs"]["/home/user/gv/r.xcu"]["xcu"]["error"] is None


@pytest.mark.parametrize("reader", ["git", "lines", "ini", "xcu"])
def test_each_lazy_reader_loads_alone_in_the_trusted_view(env, reader) -> None:
    """Regression: the host-side probe loads before dropping privileges only the modules the
    request's readers use (their import costs 40-90 ms a probe); a request that asks for one
    reader alone must never fail with "No module named ..." after the drop."""
    _sh(env, "rm -rf ~/lz && mkdir -p ~/lz && cd ~/lz && git init -q && git config user.email a@b && git config user.name a "
             "&& echo osg-lazy-token > t.txt && git add t.txt && git commit -q -m one "
             "&& printf '[s]\\nkey = v\\n' > c.ini "
             "&& printf '<?xml version=\"1.0\"?>\\n<oor:items xmlns:oor=\"http://openoffice.org/2001/registry\">"
             "</oor:items>\\n' > r.xcu")
    request = {
        "git": ProbeRequest(roots=("~/lz/t.txt",), git=("~/lz",), tokens=("osg-lazy-token",)),
        "lines": ProbeRequest(roots=("~/lz",), lines=("~/lz",)),
        "ini": ProbeRequest(roots=("~/lz/c.ini",), configs=(("~/lz/c.ini", "ini"),)),
        "xcu": ProbeRequest(roots=("~/lz/r.xcu",), configs=(("~/lz/r.xcu", "xcu"),)),
    }[reader]
    state = probe(env, request)
    assert not [e for e in state["errors"] if "No module named" in e], state["errors"]
    if reader == "git":
        assert state["git"]["/home/user/lz"].get("error") is None
        assert len(state["git"]["/home/user/lz"]["hits"]["osg-lazy-token"]) >= 1
    elif reader == "lines":
        assert state["lines"]["/home/user/lz/t.txt"] == [[1, state["lines"]["/home/user/lz/t.txt"][0][1]]]
    elif reader == "ini":
        assert state["configs"]["/home/user/lz/c.ini"]["ini"]["error"] is None
        assert state["configs"]["/home/user/lz/c.ini"]["ini"]["data"] == {"s": {"key": "v"}}
    else:
        assert state["configs"]["/home/user/lz/r.xcu"]["xcu"]["error"] is None
