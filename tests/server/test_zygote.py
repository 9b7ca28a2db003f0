"""``python -c`` commands forked by a warm zygote behave as a cold ``python -c`` does.

Each program runs twice through the server's ``_proc.run``: as ``python3 -c`` (forked by the
zygote) and as ``env python3 -c`` (not a python argv: started cold, as before the zygote);
exit code, stdout and stderr must be the same. Then what only a process can show: its
own session (killed whole on timeout), a zygote killed under a running command, many
commands at once, and pyautogui on a real environment's display.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from osguard.server import _proc, zygote

from _support import start_as_built  # noqa: E402

PROGRAMS = {
    "argv and __main__": ("import sys; print(sys.argv, __name__, sys.path[0] == '')", ["a b", "c"]),
    "exit None": ("import sys; print('x'); sys.exit()", []),
    "exit code": ("import sys; sys.exit(7)", []),
    "exit message": ("import sys; print('out'); sys.exit('bad thing')", []),
    "exception": ("def f():\n    raise ValueError('boom')\nf()", []),
    "syntax error": ("print(1 +)", []),
    "atexit and flush": ("import atexit, sys; atexit.register(lambda: print('bye'));"
                         " sys.stdout.write('no newline')", []),
    "non-daemon thread": ("import threading, time\n"
                          "def late():\n    time.sleep(0.3); print('thread done')\n"
                          "threading.Thread(target=late).start(); print('main done')", []),
    "stdin is empty": ("import sys; print(repr(sys.stdin.read()))", []),
    "environment": ("import os; print(sorted(k for k in os.environ if k != '_'))", []),
    "stderr and stdout": ("import sys; print('o'); print('e', file=sys.stderr)", []),
    "os._exit": ("import os; print('lost?', flush=True); os._exit(5)", []),
    "fresh globals": ("print(sorted(globals().items(), key=str), __name__)", []),
    "orig_argv": ("import sys; print(sys.orig_argv[1:], sys.argv)", ["x"]),
    "unclosed file flushed at exit": ("import sys; f = open(sys.argv[1], 'w'); f.write('kept');"
                                      " print(open(sys.argv[1]).read() == '')", ["/dev/null"]),
    "__del__ at exit": ("class A:\n    def __del__(self): print('deleted')\na = A()", []),
    "KeyboardInterrupt": ("raise KeyboardInterrupt", []),
    "huge exit code": ("import sys; sys.exit(2**70)", []),
    "exit code beyond an int": ("import sys; sys.exit(2**40 + 3)", []),
    "stdout closed by the command": ("import sys; sys.stdout.close()", []),
    "only stdio open": ("import os; print(sorted(os.listdir('/proc/self/fd')))", []),
}


def _both(code: str, args: list[str], **kw) -> tuple[_proc.Completed, _proc.Completed]:
    warm = _proc.run(["python3", "-c", code, *args], **kw)
    cold = _proc.run(["env", "python3", "-c", code, *args], **kw)
    return warm, cold


def _running_zygote() -> "zygote.Zygote | None":
    """The python3 zygote once it runs (starting one if none), or None after 5 s."""
    executable = zygote.qualifies(["python3", "-c", "pass"], False)
    for _ in range(100):
        current = zygote.zygote_for(executable)
        if current is not None:
            return current
        time.sleep(0.05)
    return None


@pytest.fixture(scope="module", autouse=True)
def warm_zygote():
    assert zygote.enabled()
    _proc.run(["python3", "-c", "pass"])  # starts the zygote; this one ran cold
    if _running_zygote() is None:
        pytest.fail("no zygote started")
    yield


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_forked_command_is_indistinguishable_from_a_cold_one(name):
    code, args = PROGRAMS[name]
    warm, cold = _both(code, args)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_the_command_really_was_forked_by_the_zygote():
    """Guards the comparison above: were both runs cold, it would prove nothing."""
    code = "import os; print(open(f'/proc/{os.getppid()}/cmdline','rb').read().split(b'\\0')[2][:40])"
    warm, cold = _both(code, [])
    assert "osguard python zygote" in warm.stdout
    assert "osguard python zygote" not in cold.stdout


def test_cwd_and_merged_stderr_as_for_a_cold_command(tmp_path):
    code = "import os, sys; print(os.getcwd()); print('err', file=sys.stderr)"
    warm, cold = _both(code, [], cwd=str(tmp_path), merge_stderr=True)
    assert warm.stdout == cold.stdout == f"{tmp_path}\nerr\n"


def test_stdin_data_reaches_the_command():
    warm, cold = _both("import sys; print(sys.stdin.read().upper())", [], stdin_data="hello")
    assert warm.stdout == cold.stdout == "HELLO\n"


def test_a_timeout_kills_the_command_and_what_it_started(tmp_path):
    marker = tmp_path / "survivor"
    code = (f"import subprocess, time; subprocess.Popen(['sh', '-c', 'sleep 3; touch {marker}']);"
            " time.sleep(60)")
    started = time.monotonic()
    result = _proc.run(["python3", "-c", code], timeout=1)
    assert result.timed_out and result.returncode == -9
    assert time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists()  # the grandchild in its session was killed too


def test_output_beyond_the_limit_is_dropped_not_kept():
    result = _proc.run(["python3", "-c", "import sys; sys.stdout.write('x' * 3_000_000)"], output_limit=1000)
    assert result.truncated and result.stdout.startswith("x" * 1000) and len(result.stdout) < 2000


def test_many_commands_at_once_keep_their_own_output():
    results: dict[int, _proc.Completed] = {}

    def one(i: int) -> None:
        results[i] = _proc.run(["python3", "-c", f"import time, sys; time.sleep(0.2); print({i}); sys.exit({i % 3})"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: (r.stdout, r.returncode) for i, r in results.items()} == {i: (f"{i}\n", i % 3) for i in range(16)}


def test_killing_the_zygote_under_a_command_loses_neither_result_nor_server():
    """An agent's `pkill python` also hits the zygote: the command in flight still ends and
    keeps its output (its exit status died with the zygote: -9), and the next commands run
    (cold, then through a new zygote)."""
    executable = zygote.qualifies(["python3", "-c", "pass"], False)
    first = zygote.zygote_for(executable)
    assert first is not None
    code = (f"import os, signal, time; os.kill({first.proc.pid}, signal.SIGKILL); time.sleep(0.3);"
            " print('still here'); raise SystemExit(4)")
    result = _proc.run(["python3", "-c", code])
    assert (result.stdout, result.returncode) == ("still here\n", -9)
    assert _proc.run(["python3", "-c", "print(6 * 7)"]).stdout == "42\n"
    second = _running_zygote()
    assert second is not None and second is not first
    assert _proc.run(["python3", "-c", "print('again')"]).stdout == "again\n"


def test_a_zygote_killed_with_its_command_reports_the_kill():
    current = _running_zygote()
    assert current is not None
    code = f"import os, signal; os.kill({current.proc.pid}, signal.SIGKILL); os.kill(os.getpid(), signal.SIGKILL)"
    assert _proc.run(["python3", "-c", code]).returncode < 0


def test_switched_off_every_command_runs_cold(monkeypatch):
    monkeypatch.setenv("OSGUARD_PYTHON_ZYGOTE", "0")
    code = "import os; print(open(f'/proc/{os.getppid()}/cmdline','rb').read()[:60])"
    assert "osguard python zygote" not in _proc.run(["python3", "-c", code]).stdout


@pytest.mark.usefixtures("private_state_dir")
def test_pyautogui_actions_in_an_environment_move_the_real_pointer(local_provider):
    """On a real display: actions forked by the zygote, several at once, each with its own
    display connection, move the real pointer."""
    env = start_as_built(local_provider)
    try:
        if not env.capabilities.gui:
            pytest.skip("the environment has no display")
        prefix = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
        for _ in range(2):  # the first runs cold and starts the zygote
            assert env.execute(["python", "-c", prefix + "print(pyautogui.size())"]).output.strip() \
                == "Size(width=1920, height=1080)"
        results = []
        threads = [threading.Thread(target=lambda i=i: results.append(env.execute(
            ["python", "-c", prefix + f"pyautogui.moveTo({100 + i}, 200); print(pyautogui.position().y)"])))
            for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [(r.returncode, r.output) for r in results] == [(0, "200\n")] * 4
        env.execute(["python", "-c", prefix + "pyautogui.moveTo(321, 456)"])
        assert env.run_bash("xdotool getmouselocation").output.startswith("x:321 y:456 ")
        # A module put in the user's site-packages after the zygote started imports, as on a
        # cold start (pip --user, a .pth file).
        user_site = env.execute(["python", "-c", "import site; print(site.getusersitepackages())"]).output.strip()
        env.run_bash(f"mkdir -p {user_site} && echo 'VALUE = 41 + 1' > {user_site}/zmod_late.py")
        assert env.execute(["python", "-c", "import zmod_late; print(zmod_late.VALUE)"]).output == "42\n"
        # Not dumpable: another process of the environment (same uid) cannot open the
        # zygote's or a forked command's /proc/PID/mem or fd (code injection, a forged go).
        running = threading.Thread(target=lambda: env.execute(["python", "-c", "import time; time.sleep(3)"]))
        running.start()
        time.sleep(1)
        probe = env.run_bash(  # (a forked command shows the zygote's command line)
            "for pid in $(pgrep -f 'osguard python zygote'); do"
            "  ls /proc/$pid/fd >/dev/null 2>&1 && echo $pid fd OPEN;"
            "  head -c1 /proc/$pid/mem >/dev/null 2>&1 && echo $pid mem OPEN; echo $pid; done").output
        running.join()
        assert len(probe.split()) >= 2 and "OPEN" not in probe, probe
        parent = env.execute(["python", "-c", "import os; print(open(f'/proc/{os.getppid()}/cmdline','rb').read()[:60])"])
        assert "osguard python zygote" in parent.output
    finally:
        env.stop()


HOSTILE = {
    "foreign pid": "s.send(json.dumps({'seq': req['seq'], 'pid': 1}).encode())",
    "garbage": "s.send(b'not json')",
    "wrong shape": "s.send(b'[1, 2]')",
}


@pytest.mark.parametrize("reply", sorted(HOSTILE))
def test_a_zygote_that_answers_wrong_is_dropped_and_killed(reply, monkeypatch):
    """Something in the environment could take the zygote's place on its socket: a reply
    naming a process that is not its child (the server kills a reply's pid on timeout) or
    not the protocol at all gets the zygote dropped and killed, and the command runs cold."""
    hostile = ("import json, socket, sys\n"
               "s = socket.socket(fileno=int(sys.argv[1]))\n"
               "while True:\n"
               "    data, fds, _, _ = socket.recv_fds(s, 1 << 20, 8)\n"
               "    if not data: break\n"
               "    req = json.loads(data)\n"
               f"    {HOSTILE[reply]}\n")
    monkeypatch.setattr(zygote, "SOURCE", hostile)
    executable = zygote.qualifies(["python3", "-c", "pass"], False)
    bad = zygote.Zygote(executable)
    fds = (os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_WRONLY))
    try:
        assert bad.spawn(["python3", "-c", "pass"], None, fds) is None
    finally:
        for fd in fds:
            os.close(fd)
    for _ in range(100):
        if bad.proc.poll() is not None:
            break
        time.sleep(0.05)
    assert not bad.alive and bad.proc.poll() is not None


def test_a_stopped_zygote_is_killed_and_the_command_runs_once(tmp_path, monkeypatch):
    """An agent's `kill -STOP` on the zygote: the command runs cold after REPLY_SECONDS, the
    zygote is killed, and the request it held is never run a second time."""
    monkeypatch.setattr(zygote, "REPLY_SECONDS", 1.0)
    current = _running_zygote()
    assert current is not None
    os.kill(current.proc.pid, signal.SIGSTOP)
    marker = tmp_path / "runs"
    result = _proc.run(["python3", "-c", f"open({str(marker)!r}, 'a').write('ran\\n')"])
    assert result.returncode == 0
    assert current.proc.wait(5) is not None and not current.alive
    time.sleep(0.5)
    assert marker.read_text() == "ran\n"


def test_an_unclosed_file_is_flushed_at_exit_as_cold(tmp_path):
    """A command that writes a file it never closes: the interpreter's exit flushes it."""
    for argv0 in (["python3"], ["env", "python3"]):
        target = tmp_path / f"out-{len(argv0)}"
        result = _proc.run([*argv0, "-c", "import sys; f = open(sys.argv[1], 'w'); f.write('hello')", str(target)])
        assert result.returncode == 0 and target.read_text() == "hello"


def test_a_module_in_the_working_directory_shadows_a_preloaded_one_as_cold(tmp_path):
    (tmp_path / "json.py").write_text("dumps = lambda value: 'shadowed'\n")
    warm, cold = _both("import json; print(json.dumps(1))", [], cwd=str(tmp_path))
    assert warm.stdout == cold.stdout == "shadowed\n"
    assert _proc.run(["python3", "-c", "import json; print(json.dumps(1))"]).stdout == "1\n"  # not kept


def test_what_a_cold_start_refuses_runs_cold():
    """A NUL or an argument over Linux's 128 KiB fails to start cold; it must fail the same."""
    assert zygote.qualifies(["python3", "-c", "print(1)\0"], False) is None
    assert zygote.qualifies(["python3", "-c", "x = 1  # " + "y" * 140_000], False) is None
    assert zygote.qualifies(["python3", "-c", "print(1)"], False)
