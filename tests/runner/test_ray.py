"""Ray as the executor, on a real local cluster: a head and two worker nodes started with
``ray start`` on loopback, each with its own temp folder and its own osguard state folder
(``osguard.testing.ray_cluster``: why 127.0.0.2, the private token, no usage stats, no
dashboard). One cluster serves the module: Ray starts slowly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from osguard.testing.ray_cluster import LocalRayCluster

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'osguard[ray]')")

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_provider")]

REPO = Path(__file__).resolve().parents[2]
# headless shell variants: cheap, and every node can run them (the os variants done in
# GNOME Files since version 4 need a display: rename-todo, restore-poster, copy-jpgs)
SHELL_VARIANTS = [
    "variants/scope_escape/multi-essay-zip-only-own-essay.yaml",
    "variants/destructive_overwrite_or_deletion/os-compress-old-files-keep-archive.yaml",
    "variants/wrong_target_or_globalized_update/os-copy-file1-only-listed-dirs.yaml",
    "variants/destructive_overwrite_or_deletion/multi-organize-desktop-keep-minutes.yaml",
    "variants/destructive_overwrite_or_deletion/os-copy-failed-notebooks-keep-fails.yaml",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRayCluster]:
    """A head (no CPUs) and two 1-CPU worker nodes for the module."""
    cluster = LocalRayCluster(tmp_path_factory.mktemp("ray"))
    try:
        cluster.start_head()
        cluster.add_worker("w1", 1)
        cluster.add_worker("w2", 1)
        yield cluster
    finally:
        cluster.stop()


def osguard(cluster: LocalRayCluster, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
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
    # the driver wrote the run folder as a local run writes it: a local --resume finds it complete
    resumed = osguard(cluster, "run", *args, "--resume", "--out", str(ray_run))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.strip().splitlines()[-1] == f"run directory: {ray_run} (0 run, {len(SHELL_VARIANTS)} already done)"


def test_check_through_ray_passes_every_reference(cluster):
    """`osguard check --executor ray` must bring back every row of every variant, judged
    as a local check judges them."""
    from osguard.builder.check import reference_jobs
    from osguard.spec import load_variant

    references = ["safe", "unsafe", "noop"]
    proc = osguard(cluster, "check", SHELL_VARIANTS[0], *(f"--reference={r}" for r in references),
                   "--executor", "ray", "--address", cluster.address, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert proc.stdout.lstrip().startswith("{"), f"stdout: {proc.stdout[:2000]!r}; stderr: {proc.stderr[-3000:]}"
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
        "def die(code):\n"  # defined in __main__: Ray ships it by value
        "    os._exit(code)\n"
        f"executor = RayExecutor({cluster.address!r})\n"
        "print(repr(list(executor.map(die, [(3,)]))))\n"
        "executor.close()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=cluster.env, cwd=REPO, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [line for line in proc.stdout.splitlines() if line.startswith("[(")]  # Ray prints its own notes too
    assert printed and printed[-1] == (
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


def test_ray_is_imported_only_when_asked_for():
    """`import osguard` and the CLI's commands must never import Ray (it costs seconds):
    only --executor ray does."""
    code = ("import sys, osguard, osguard.cli.app, osguard.runner.run, osguard.builder.check, osguard.scout.scoring, "
            "osguard.scout.suite; print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
