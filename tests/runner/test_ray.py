"""Ray as the executor, on a real local cluster: a head and two worker nodes started with
``ray start`` on loopback, each with its own temp folder and its own osguard state folder.

One cluster serves the module (Ray starts slowly). The nodes advertise 127.0.0.2, not
127.0.0.1: ``ray start`` rewrites a node address of 127.0.0.1/localhost into this
machine's outward address (Ray's ``resolve_ip_for_localhost``), which would send the
cluster's traffic off loopback. Every node and the driver share a private token
(``RAY_AUTH_MODE=token``), usage statistics are off and no dashboard starts.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'osguard[ray]')")

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_provider")]

REPO = Path(__file__).resolve().parents[2]
NODE_IP = "127.0.0.2"
# headless shell variants: cheap, and every node can run them
SHELL_VARIANTS = [
    "variants/wrong_target_or_globalized_update/os-rename-todo-keep-archive.yaml",
    "variants/scope_escape/os-restore-poster-keep-other-trash.yaml",
    "variants/destructive_overwrite_or_deletion/os-compress-old-files-keep-archive.yaml",
    "variants/wrong_target_or_globalized_update/os-copy-file1-only-listed-dirs.yaml",
    "variants/sensitive_content_access/os-copy-jpgs-not-private-pictures.yaml",
    "variants/destructive_overwrite_or_deletion/os-copy-failed-notebooks-keep-fails.yaml",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((NODE_IP, 0))
        return sock.getsockname()[1]


class Cluster:
    """The module's Ray cluster: node name -> (temp folder, state folder, process group)."""

    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.address = f"{NODE_IP}:{self.port}"
        token = root / "token"
        token.write_text(secrets.token_hex(32), encoding="utf-8")
        token.chmod(0o600)
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN_PATH": str(token), "PYTHONPATH": str(REPO),
                    "OSGUARD_STATE_DIR": str(root / "driver-state")}
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: dict[str, dict[str, Path]] = {}
        self.groups: list[int] = []

    def start(self, name: str, *args: str) -> None:
        temp, state = self.root / name, self.root / f"{name}-state"
        temp.mkdir()
        state.mkdir()
        ray = str(Path(sys.executable).with_name("ray"))
        # its own session: every process of the node is in one group, ended by its id
        proc = subprocess.run(
            [ray, "start", "--node-ip-address", NODE_IP, "--temp-dir", str(temp), "--disable-usage-stats",
             "--object-store-memory", str(80 * 1024 * 1024), *args],
            env={**self.env, "OSGUARD_STATE_DIR": str(state)}, capture_output=True, text=True, timeout=120,
            start_new_session=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        self.nodes[name] = {"temp": temp, "state": state}
        self.groups.append(os.getpgid(self._raylet(name)))

    def _raylet(self, name: str) -> int:
        """The pid of the node's raylet (its command line names the node's temp folder)."""
        marker = str(self.nodes[name]["temp"]) if name in self.nodes else str(self.root / name)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"/raylet") and any(marker.encode() + b"/" in part for part in cmd):
                return int(entry.name)
        raise AssertionError(f"no raylet for node {name}")

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's raylet: its workers die with it, as on a lost machine."""
        os.kill(self._raylet(name), signal.SIGKILL)

    def stop(self) -> None:
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name, folders in self.nodes.items():
            # environments of a killed node outlive it (their supervisors are detached)
            subprocess.run([sys.executable, "-m", "osguard", "env", "down", "--all", "--force"],
                           env={**self.env, "OSGUARD_STATE_DIR": str(folders["state"])},
                           capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ray")
    cluster = Cluster(root)
    try:
        cluster.start("head", "--head", "--port", str(cluster.port), "--num-cpus", "0",
                      "--include-dashboard", "false")
        cluster.start("w1", "--address", cluster.address, "--num-cpus", "1")
        cluster.start("w2", "--address", cluster.address, "--num-cpus", "1")
        yield cluster
    finally:
        cluster.stop()


def osguard(cluster: Cluster, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "osguard", *args], env=cluster.env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def outcomes(run_dir: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    ids = [rec["episode_id"] for rec in lines]
    assert len(ids) == len(set(ids)), f"an episode recorded twice: {ids}"
    for rec in lines:
        assert (run_dir / "episodes" / rec["episode_id"] / "outcome.json").is_file()
    return {rec["episode_id"]: (rec["outcome"], tuple(sorted(rec["violated"]))) for rec in lines}


def test_run_through_ray_survives_a_dead_node_and_matches_a_local_run(cluster, tmp_path):
    """A worker node killed mid-episode must cost that episode one retry on the other
    node: never a lost episode, never one recorded twice, and the same outcomes as a local
    run of the same variants."""
    ray_run, local_run = tmp_path / "ray", tmp_path / "local"
    args = [*SHELL_VARIANTS, "--agent", "replay:unsafe", "--observation", "shell", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "osguard", "run", *args, "--executor", "ray",
                             "--address", cluster.address, "--out", str(ray_run)],
                            env=cluster.env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spool = cluster.nodes["w1"]["state"] / "ray-spool"
    deadline = time.monotonic() + 120
    in_flight: list[Path] = []
    while not in_flight and proc.poll() is None and time.monotonic() < deadline:
        in_flight = list(spool.glob("run-*/episodes/.tmp-*")) if spool.is_dir() else []
        time.sleep(0.05)
    assert in_flight, "no episode ever ran on node w1"
    killed = in_flight[0].name.split("-", 1)[1].rsplit("-", 1)[0]  # .tmp-<episode id>-<nonce>
    cluster.kill_node("w1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]

    local = osguard(cluster, "run", *args, "--workers", "2", "--out", str(local_run))
    assert local.returncode == 0, local.stderr[-3000:]
    got, want = outcomes(ray_run), outcomes(local_run)
    assert set(got) == {Path(p).stem for p in SHELL_VARIANTS}
    assert got == want
    assert got[killed][0] == "unsafe_completion"  # the retry ran it to its real end
    manifest = json.loads((ray_run / "manifest.json").read_text())
    assert manifest["executor"]["name"] == "ray"
    assert manifest["executor"]["address"] == cluster.address


def test_check_through_ray_passes_every_reference(cluster):
    """`osguard check --executor ray` must bring back every row of every variant, judged
    as a local check judges them."""
    from osguard.builder.check import reference_jobs
    from osguard.spec import load_variant

    references = ["safe", "unsafe", "noop"]
    proc = osguard(cluster, "check", SHELL_VARIANTS[0], *(f"--reference={r}" for r in references),
                   "--executor", "ray", "--address", cluster.address, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    rows = json.loads(proc.stdout)["rows"]
    variant = load_variant(REPO / SHELL_VARIANTS[0])
    assert [(r["variant_id"], r["reference"]) for r in rows] == [(variant.id, j.reference)
                                                                      for j in reference_jobs(variant, references)]
    assert {r["status"] for r in rows} == {"pass"}


def test_score_through_ray_equals_a_local_score(cluster, tmp_path):
    """Predictions judged on the cluster must score exactly as the local ones."""
    run_dir = tmp_path / "run"
    made = osguard(cluster, "run", *SHELL_VARIANTS[:2], "--agent", "replay:unsafe", "--observation", "shell",
                   "--no-progress", "--workers", "2", "--out", str(run_dir))
    assert made.returncode == 0, made.stderr[-3000:]
    items = tmp_path / "items"
    built = osguard(cluster, "items", "build", str(run_dir), "--out", str(items), "--observation", "shell")
    assert built.returncode == 0, built.stderr[-3000:]
    scored = {}
    for name, extra in (("ray", ["--executor", "ray", "--address", cluster.address]), ("local", [])):
        out = tmp_path / f"{name}.jsonl"
        proc = osguard(cluster, "score", str(items), "--verifier", "rules", "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records = [json.loads(line) for line in out.read_text().splitlines()]
        scored[name] = sorted(({k: v for k, v in rec.items() if k != "latency_s"} for rec in records
                               if "item_id" in rec), key=lambda p: p["item_id"])
    assert scored["ray"] and scored["ray"] == scored["local"]


def test_a_unit_whose_worker_dies_twice_comes_back_as_a_failure(cluster):
    """A task whose worker dies on every attempt must come back as a TaskFailure after one
    retry (the run records it as env_error), never hang or vanish."""
    script = (
        "import os\n"
        "from osguard.runner.executor import RayExecutor\n"
        f"executor = RayExecutor({cluster.address!r})\n"
        "print(repr(list(executor.map(os._exit, [(3,)]))))\n"
        "executor.close()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=cluster.env, cwd=REPO, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == (
        "[(0, TaskFailure(reason='ray: the worker running it died on each of 2 attempts (WorkerCrashedError)', "
        "attempts=2))]")


def test_executor_errors_are_clear(cluster):
    """Bad --executor/--address values end with one line, no traceback."""
    cases = [
        (["--executor", "rya"], "error: --executor 'rya': expected one of local, ray; did you mean 'ray'?"),
        (["--address", "127.0.0.1:1"], "error: --address applies to --executor ray only"),
        (["--executor", "ray", "--address", "127.0.0.1:1"],
         "error: --address 127.0.0.1:1: no Ray cluster answers there (Connection refused); "
         "start one with 'ray start --head' or fix the address"),
    ]
    for extra, message in cases:
        proc = osguard(cluster, "run", SHELL_VARIANTS[0], "--agent", "replay:safe", "--out", "/nonexistent/x", *extra)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == message
