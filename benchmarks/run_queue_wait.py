"""How long the ranks wait on the run queue of a busy machine, per CPU-second of work (issue 35).

A 2-rank ``gnn-dist train`` (``sbm-small``, METIS, 2-layer GCN, hidden 64) runs beside
``--load`` busy processes (``while True: pass``), once per configuration: the code of this
checkout ("after"), optionally that of ``--before REV`` (a temporary detached worktree), each
with ``--threads`` torch threads per rank (``OMP_NUM_THREADS``; 1 is the share of 2 ranks on 2
CPUs, 2 what ``cpu_count // ranks`` gave on a 4-CPU machine, or in a container whose quota is
below the host's CPUs). Measured from outside, as the issue measured it: every 50 ms the
ranks' threads are read from ``/proc/PID/task/*`` (:mod:`gnn_dist.run_queue`): their states (how
many threads, how many runnable) and their schedstat (CPU and run-queue ns; a thread's last
reading counts), over each rank's whole life (each checkout first trains one unmeasured epoch,
so no measured run compiles the numba kernels). Per configuration: CPU-seconds and run-queue
seconds per rank, wait per CPU-second, threads per rank (most seen), runnable threads per
sample (mean, most), the mean epoch time after the first, and the trainer's own ``wait_cpu_s``
summed over the epochs (rank 0; null for code without it). Linux only.

Usage::

    python benchmarks/run_queue_wait.py --before 04a5ffe        # before vs after, 1 and 2 threads (~5 min)
    python benchmarks/run_queue_wait.py --before 04a5ffe --threads 1 --rounds 3   # before/after/after/before/...
    python benchmarks/run_queue_wait.py --threads 1 --epochs 30 # this checkout only, quicker

Results: ``benchmarks/results/run_queue_wait_[hardware]_[date].{md,json}``. The machine's own
load (other users) adds to ``--load``: compare configurations of one run, not across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_HERE = Path(__file__).resolve().parent

import common  # noqa: E402
from gnn_dist import run_queue  # noqa: E402

SAMPLE_S = 0.05


@dataclass
class RankSample:
    """One rank's readings: the last (CPU ns, wait ns) of each thread, threads and runnable counts."""

    times: dict[int, tuple[int, int]] = field(default_factory=dict)
    threads: list[int] = field(default_factory=list)
    runnable: list[int] = field(default_factory=list)

    def add(self, pid: int) -> None:
        states = run_queue.thread_states(pid)
        now = run_queue.snapshot(pid) or {}
        if not states:
            return
        self.times.update(now)
        self.threads.append(len(states))
        self.runnable.append(sum(t.runnable for t in states))

    def figures(self) -> dict[str, float]:
        cpu = sum(c for c, _ in self.times.values()) / 1e9
        wait = sum(w for _, w in self.times.values()) / 1e9
        return {"cpu_s": cpu, "wait_s": wait, "wait_per_cpu_s": wait / cpu if cpu else float("nan"),
                "threads_max": max(self.threads, default=0),
                "runnable_mean": sum(self.runnable) / max(1, len(self.runnable)),
                "runnable_max": max(self.runnable, default=0)}


@contextlib.contextmanager
def busy_load(count: int) -> Iterator[list[int]]:
    """``count`` processes that spin on a CPU, stopped (by pid) on exit."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """A temporary detached worktree of ``rev`` of this repository, removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix="run-queue-before-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], cwd=common.repo_root(), check=True,
                   capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=common.repo_root(),
                       capture_output=True)


def _descendants(root: int) -> list[int]:
    """The pids below ``root`` (children, their children, ...), from ``/proc/*/stat``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                parents[int(entry)] = int(text[text.rfind(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [root]
    while frontier:
        kids = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def _is_rank(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return b"gnn_dist.train" in args and b"gnn_dist.distributed.local_run" not in args


def run_training(code: Path, data: str, threads: int, epochs: int, metrics: Path, timeout: float) -> dict:
    """Train 2 ranks with ``code`` first on the path and ``threads`` torch threads per rank,
    sampling the ranks' threads until the job ends; the per-rank figures and the job's."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=os.pathsep.join([str(code), str(code / "tests")]))
    cmd = [sys.executable, "-m", "gnn_dist_cli", "train", "--data", data, "--nproc", "2", "--model", "gcn",
           "--hidden", "64", "--layers", "2", "--epochs", str(epochs), "--lr", "0.01", "--seed", "0",
           "--metrics", str(metrics), "--log-every", "0"]
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    ranks: dict[int, RankSample] = {}
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < timeout:
        for pid in filter(_is_rank, _descendants(proc.pid)):
            ranks.setdefault(pid, RankSample()).add(pid)
        time.sleep(SAMPLE_S)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()[0]
    if proc.returncode != 0:
        raise RuntimeError(f"training failed ({proc.returncode}):\n{out[-3000:]}")
    return {"ranks": [r.figures() for r in ranks.values()], "wall_s": time.monotonic() - start, **_epochs(metrics)}


def _epochs(metrics: Path) -> dict:
    recs = [json.loads(line) for line in metrics.read_text().splitlines()][1:]
    times = [r["epoch_time_s"] for r in recs[1:]] or [r["epoch_time_s"] for r in recs]
    waits = [r.get("wait_cpu_s") for r in recs]
    return {"epoch_ms": 1e3 * sum(times) / len(times),
            "trainer_wait_cpu_s": sum(waits) if all(w is not None for w in waits) else None}


def _mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def markdown(results: dict, env: dict, args: argparse.Namespace) -> str:
    headers = ["code", "threads/rank", "round", "CPU s/rank", "wait s/rank", "wait per CPU-s", "threads/rank (max)",
               "runnable/rank (mean, max)", "epoch ms", "trainer wait_cpu_s (rank 0)"]
    rows = []
    for name, res in results.items():
        r = res["ranks"]
        trainer = res["trainer_wait_cpu_s"]
        rows.append([res["code"], res["threads"], res.get("round", 1), f"{_mean(r, 'cpu_s'):.1f}", f"{_mean(r, 'wait_s'):.1f}",
                     f"{_mean(r, 'wait_s') / _mean(r, 'cpu_s'):.2f}", max(x["threads_max"] for x in r),
                     f"{_mean(r, 'runnable_mean'):.2f}, {max(x['runnable_max'] for x in r)}",
                     f"{res['epoch_ms']:.1f}", "—" if trainer is None else f"{trainer:.2f}"])
    return (f"# Run-queue wait of the ranks (issue 35)\n\n{env['date']}, {env['cpu_model']}, {env['cpu_count']} CPUs, "
            f"load average before {env['load_average_1_5_15']}; {args.dataset}, 2 ranks, {args.epochs} epochs, "
            f"{args.load} busy processes beside them.\n\n" + common.markdown_table(headers, rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", metavar="REV", help="also run the code of git revision REV (a temporary worktree)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads per rank (default: 1 2)")
    p.add_argument("--rounds", type=int, default=1, help="runs of every configuration, the order of the "
                   "checkouts reversed every other round (default: 1)")
    p.add_argument("--load", type=int, default=2, help="busy processes beside the job (default: 2)")
    p.add_argument("--epochs", type=int, default=150)
    p.add_argument("--dataset", default="sbm-small")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per training run")
    p.add_argument("--cache-dir", default=str(_HERE / ".cache"))
    p.add_argument("--out", help="result stem (default: benchmarks/results/run_queue_wait_[hardware]_[date])")
    args = p.parse_args(argv)
    data = common.cached_metis_partitions(args.dataset, [2], 0, args.cache_dir)[2]
    env = common.environment(["torch", "numba"])
    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
        codes = {"after": common.repo_root()}
        if args.before:
            codes = {f"before ({args.before})": stack.enter_context(checkout(args.before)), **codes}
        for code in codes.values():   # fills each checkout's numba cache: no run below compiles kernels
            run_training(code, data, 1, 1, Path(scratch) / "warm.jsonl", args.timeout)
        stack.enter_context(busy_load(args.load))
        for round_, threads in ((r, t) for r in range(args.rounds) for t in args.threads):
            order = list(codes.items()) if round_ % 2 == 0 else list(codes.items())[::-1]   # ABBA...
            for name, code in order:
                key = f"{name}, {threads} thread(s), round {round_ + 1}"
                res = run_training(code, data, threads, args.epochs, Path(scratch) / "m.jsonl", args.timeout)
                results[key] = {"code": name, "threads": threads, "round": round_ + 1, **res}
                print(key, json.dumps({k: v for k, v in res.items() if k != "ranks"}), flush=True)
    text = markdown(results, env, args)
    stem = args.out or common.default_result_stem("run_queue_wait")
    common.write_results(stem, {"environment": env, "args": vars(args), "results": results}, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
