"""Benchmark the fleet fan-out: what the controller spends per node, and how soon each node gets its work.

Each measurement is one real ``workload run`` subprocess (the controller) over SSH to fresh VMs of
the Docker test bed, with ``tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json``: the real
NvidiaCudaInstallation (driver + CUDA from the stand-in runfile, then a reboot through the engine),
DockerInstallation and NvidiaContainerToolkitInstallation. Every measurement gets VMs of its own,
so each run starts from fresh machines.

For each node count of ``--hosts`` (default ``4,8,16``), one run with ``--parallel N`` per round;
rounds (``--rounds``) interleave the counts (4 8 16 4 8 16 ...), so that the neighbours' load hits
every count alike. Per count, median and interval over the rounds (``_measure.py``) of:

* the controller's CPU seconds per node (user + system of the ``workload run`` process, its
  threads and the children it reaped) and its peak RSS (``VmHWM``; the VMs are containers, not its
  children): what our side costs, whatever the VMs and the neighbours do to the wall clock;
* the fan-out's latency per node, from the controller's own trace (``_fleet_trace.py`` runs the
  CLI in the measured process and notes when each host got each command and step): seconds from
  the fan-out's start (``Engine.run``) to each host's first remote operation (command or file
  access) started and done (the SSH connection is opened by the first one), the median host's and
  the last host's; the same for the start of every step, and the median host's step length;
* the wall time, and the wall time over the machine's CPU-bound floor (every process's busy CPU
  during the run spread over the cores: near 1, the machine was saturated and the wall says more
  about the neighbours than about us).

Then, with two counts or more, a straight line ``fixed + per_node * N`` per round through each
round's counts (least squares, ``_fleet_stats.py``) for the controller's CPU, its peak RSS and the
last host's first operation done, read at ``--extrapolate`` nodes (default 1,000); median and interval of
the per-round predictions. The assumptions are printed with the figures.

``--serial`` also runs the largest count with ``--parallel 1`` in every round, for the old ratio
parallel/serial wall (goal <= 0.25 at 16 hosts or more).

``--slurm``: the Slurm column instead (``_fleet_slurm.py``). One test-bed Slurm cluster with as many
compute nodes as the largest count, provisioned once over SSH; then per count and round, the same
work on the same N machines both ways, side by side: ``workload run`` over SSH to the nodes'
sshd (``ssh``) and ``workload run --slurm`` through the login node, one job step per node and
command (``slurm``). The work is the fleet profile re-checked on provisioned nodes (facts read,
nothing to change: what a Slurm run does on nodes its admins provisioned). Beside the figures above,
the login node's CPU and peak memory (its cgroup: ``srun`` processes, ``sshd``, ``slurmctld``) for
both (the SSH runs do not use it: that is its idle background), and per round the ratios
slurm/ssh of the controller's CPU, the controller plus login node's CPU, peak RSS and wall.

    .venv/bin/python bench/bench_fleet.py [--hosts 4,8,16] [--rounds 3] [--serial | --slurm]
        [--extrapolate 1000] [--json]

Needs root, dockerd and debootstrap (the test bed); a round of 4+8+16 hosts takes about 4 minutes on
2 idle cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from _fleet_slurm import ContainerMeter, Usage  # noqa: E402
from _fleet_stats import FanOut, extrapolate, fan_out, spread  # noqa: E402
from _measure import Goal, Report, add_arguments, figure, interleave, paired_ratios, run_process  # noqa: E402

from tests.test_installers_e2e import install_lspci  # noqa: E402
from tests.testbed import acquire_engine, ensure_image  # noqa: E402
from tests.testbed.aptrepo import ensure_repo  # noqa: E402
from tests.testbed.dockerd import DockerEngine  # noqa: E402
from tests.testbed.fileserver import CudaRunfileServer, start_cuda_runfile_server  # noqa: E402
from tests.testbed.freshvm import FreshVM, create_vms  # noqa: E402

PROFILE = ROOT / "tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json"
TRACER = BENCH / "_fleet_trace.py"


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, every process and container)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class RunFailed(Exception):
    """One measured ``workload run`` did not finish on every node (its round is left out, and said so)."""


@dataclass
class FleetRun:
    hosts: int
    wall_s: float
    controller_cpu_s: float
    peak_rss_mib: float
    busy_s: float  # CPU seconds every process and VM container of the machine spent busy meanwhile
    fan: FanOut
    login: Usage | None = None  # the Slurm login node's cgroup meanwhile (--slurm)


def run_controller(
    argv: Sequence[str], work: Path, tag: str, hosts: int, meter: ContainerMeter | None = None
) -> FleetRun:
    """One traced ``workload`` controller process (``argv``: the CLI's arguments); fails loudly if it fails.

    ``meter``: also what that container (the Slurm login node) spent meanwhile.
    """
    trace_path = work / f"trace-{tag}.json"
    log = work / f"run-{tag}.log"
    with log.open("w") as out:
        if meter is not None:
            meter.start()
        busy_before = _machine_busy_s()
        command = [sys.executable, str(TRACER), str(trace_path), *argv]
        run = run_process(command, cwd=ROOT, stdout=out, check=False, poll_s=0.1)
        busy = _machine_busy_s() - busy_before
        login = meter.stop() if meter is not None else None
    if run.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise RunFailed(f"workload {argv[0]} exited {run.returncode} ({tag}); the end of its output:\n{tail}")
    fan = fan_out(json.loads(trace_path.read_text()))
    if len(fan.first_sent) != hosts:
        raise RunFailed(f"{tag}: {len(fan.first_sent)} of {hosts} hosts were reached")
    return FleetRun(hosts, run.wall_s, run.cpu_s, run.peak_rss_mib, busy, fan, login)


def measure_ssh(
    engine: DockerEngine,
    image: str,
    repo: Path,
    server: CudaRunfileServer,
    hosts: int,
    parallel: int,
    work: Path,
    runs_dir: Path | None = None,
) -> FleetRun:
    """``workload run`` of the fleet profile over SSH on ``hosts`` fresh VMs."""
    vms: list[FreshVM] = create_vms(
        engine, image, repo, hosts, os_release="ubuntu-22.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False
    )
    try:
        for vm in vms:
            install_lspci(vm)
        tag = f"ssh-{hosts}-{parallel}-{next(_COUNT)}"
        inventory = work / f"fleet-{tag}.txt"
        inventory.write_text("".join(f"{vm.host_spec} key={vm.key_path} name=vm-{i:02d}\n" for i, vm in enumerate(vms)))
        known_hosts = work / f"known_hosts-{tag}"
        known_hosts.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
        argv = ["run", "--profile", str(PROFILE)]
        argv += ["--parameters", f"LinuxLocalRunFile={server.url},,,RunFileSha256={server.sha256}"]
        argv += ["--inventory", str(inventory), "--known-hosts", str(known_hosts), "--parallel", str(parallel)]
        argv += ["--output-dir", str(runs_dir or work / "runs")]
        return run_controller(argv, work, tag, hosts)
    finally:
        for vm in vms:
            vm.remove()


_COUNT = itertools.count()


def host_counts(text: str) -> list[int]:
    """``4,8,16`` -> ``[4, 8, 16]``: positive, distinct, ascending."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--hosts: a comma-separated list of node counts, got {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"--hosts: node counts of 1 or more, got {text!r}")
    return counts


def add_column(report: Report, label: str, runs: dict[int, list[FleetRun]], cores: int) -> None:
    """Per node count: the controller's CPU per node and peak RSS, the fan-out's latency, the wall time."""
    for n, got in runs.items():
        p = f"{label} {n:>2} nodes:"
        report.add(figure(f"{p} controller CPU per node", [g.controller_cpu_s / n for g in got], unit="CPU-s"))
        report.add(figure(f"{p} controller peak RSS", [g.peak_rss_mib for g in got], unit="MiB", digits=1))
        logins = [g.login for g in got if g.login is not None]
        if len(logins) == len(got):
            report.add(figure(f"{p} login node CPU per node", [u.cpu_s / n for u in logins], unit="CPU-s"))
            peaks = [u.peak_mib for u in logins if u.peak_mib is not None]
            if len(peaks) == len(got):
                report.add(figure(f"{p} login node peak memory (cgroup)", peaks, unit="MiB", digits=1))
        report.add(figure(f"{p} start-up before the fan-out", [g.fan.startup_s for g in got], unit="s", digits=2))
        for what in ("started", "done"):
            firsts = [spread(g.fan.first_sent if what == "started" else g.fan.first_done) for g in got]
            report.add(figure(f"{p} first operation {what}, median node", [m for m, _ in firsts], unit="s", digits=2))
            report.add(figure(f"{p} first operation {what}, last node", [x for _, x in firsts], unit="s", digits=2))
        report.add(figure(f"{p} remote operations per node", [_ops(g) for g in got], digits=1))
        for index in sorted(got[0].fan.steps):
            starts = [spread({h: s for h, (s, _) in g.fan.steps[index].items()}) for g in got]
            lengths = [spread({h: d for h, (_, d) in g.fan.steps[index].items()}) for g in got]
            report.add(figure(f"{p} step {index} start, last node", [x for _, x in starts], unit="s", digits=2))
            report.add(figure(f"{p} step {index} length, median node", [m for m, _ in lengths], unit="s", digits=2))
        report.add(figure(f"{p} wall", [g.wall_s for g in got], unit="s", digits=1))
        report.add(figure(f"{p} wall / CPU-bound floor", [g.wall_s * cores / g.busy_s for g in got], digits=2))


def _ops(g: FleetRun) -> float:
    return sum(g.fan.operations.values()) / g.hosts


def _login_cpu(g: FleetRun) -> float:
    return g.login.cpu_s if g.login is not None else 0.0


EXTRAPOLATED: list[tuple[str, str, Callable[[FleetRun], float]]] = [
    ("controller CPU", "CPU-s", lambda g: g.controller_cpu_s),
    ("controller peak RSS", "MiB", lambda g: g.peak_rss_mib),
    ("first operation done, last node", "s", lambda g: spread(g.fan.first_done)[1]),
]
LOGIN_EXTRAPOLATED: list[tuple[str, str, Callable[[FleetRun], float]]] = [
    ("login node CPU", "CPU-s", _login_cpu),
]


def add_extrapolation(report: Report, label: str, runs: dict[int, list[FleetRun]], target: int) -> None:
    """Per round, a line through the counts; its slope (per node) and its value at ``target`` nodes."""
    rounds = len(next(iter(runs.values())))
    measured = EXTRAPOLATED + (LOGIN_EXTRAPOLATED if label == "slurm" else [])
    for name, unit, pick in measured:
        per_round = [{n: pick(got[r]) for n, got in runs.items()} for r in range(rounds)]
        lines, at = extrapolate(per_round, target)
        report.add(figure(f"{label} {name}: per node (slope)", [line.per_node for line in lines], unit=unit, digits=4))
        report.add(figure(f"{label} {name}: fixed (intercept)", [line.fixed for line in lines], unit=unit, digits=2))
        report.add(figure(f"{label} {name} at {target:,} nodes (straight line)", at, unit=unit, digits=1))


def add_ratios(report: Report, ssh: dict[int, list[FleetRun]], slurm: dict[int, list[FleetRun]]) -> None:
    """Per count, per round: Slurm over SSH on the same nodes, same work, measured one after the other."""
    for n in ssh:
        a, b = slurm[n], ssh[n]
        p = f"slurm/ssh {n:>2} nodes:"
        report.add(
            figure(
                f"{p} controller CPU", paired_ratios([g.controller_cpu_s for g in a], [g.controller_cpu_s for g in b])
            )
        )
        both = paired_ratios([g.controller_cpu_s + _login_cpu(g) for g in a], [g.controller_cpu_s for g in b])
        report.add(figure(f"{p} controller + login node CPU over controller CPU", both))
        report.add(
            figure(f"{p} controller peak RSS", paired_ratios([g.peak_rss_mib for g in a], [g.peak_rss_mib for g in b]))
        )
        report.add(figure(f"{p} wall", paired_ratios([g.wall_s for g in a], [g.wall_s for g in b])))


def assumptions(counts: list[int], target: int, slurm: bool) -> list[str]:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    out = [
        f"straight lines through {', '.join(map(str, counts))} nodes, read at {target:,}: nothing is assumed "
        "to turn superlinear in between (the limits below say where that breaks);",
        "--parallel N = N: one worker thread per node plus paramiko's transport thread per connection "
        f"(2 threads and 1 socket per node); this process's open-file limit is {soft} "
        "(raise it beyond ~1,000 nodes);",
        "the controller is one Python process: its threads share one GIL, so its CPU-s per node times N "
        "is a floor on the fan-out's length once that exceeds one core's worth;",
        "the VMs run on the controller's own machine here (the latency figures include their CPU "
        "contention); the controller CPU and RSS figures are the controller's alone.",
    ]
    if slurm:
        out.append(
            "slurm: one SSH connection to the login node per node (SlurmHost) and one srun process there "
            "per running step (at most N at once): the login node's CPU and memory grow with N as its "
            "figures show; slurmctld's step creation is serial in slurmctld, which these counts do not reach."
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser, rounds=3)
    parser.add_argument("--hosts", type=host_counts, default=[4, 8, 16], help="node counts (default 4,8,16)")
    parser.add_argument(
        "--serial", action="store_true", help="also the largest count with --parallel 1 (not with --slurm)"
    )
    parser.add_argument(
        "--slurm", action="store_true", help="the Slurm column: the same nodes over SSH and through Slurm"
    )
    parser.add_argument(
        "--login-max-startups",
        type=int,
        metavar="N",
        help="--slurm: raise the login node's sshd MaxStartups to N (its default 10:30:100 drops some of the "
        "connections --slurm opens at once beyond 10 nodes)",
    )
    parser.add_argument("--extrapolate", type=int, default=1000, help="read the lines at this many nodes")
    parser.add_argument("--runs-dir", type=Path, help="keep the run folders (logs, run.json) here")
    args = parser.parse_args()
    if args.serial and args.slurm:
        parser.error("--serial and --slurm: one at a time")
    counts: list[int] = args.hosts
    report = Report("bench_fleet", settings={k: str(v) for k, v in vars(args).items() if k != "json"})
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    largest = counts[-1]
    parameters = f"LinuxLocalRunFile={server.url},,,RunFileSha256={server.sha256}"
    columns = ["ssh", "slurm"] if args.slurm else ["ssh"]
    try:
        image, repo = ensure_image(engine), ensure_repo()
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
            work = Path(tmp)
            if args.slurm:
                variants, cleanup = slurm_variants(
                    engine, repo, counts, parameters, work, args.runs_dir, args.login_max_startups
                )
            else:
                print(f"fresh VMs per run: {', '.join(map(str, counts))}; profile {PROFILE.name}", flush=True)
                variants, cleanup = [], lambda: None

                def ssh(n: int) -> Callable[[int], FleetRun]:
                    return lambda r: measure_ssh(engine, image, repo, server, n, n, work, args.runs_dir)

                variants = [ssh(n) for n in counts]
                if args.serial:
                    variants.append(lambda r: measure_ssh(engine, image, repo, server, largest, 1, work, args.runs_dir))
            names = [f"{c} {n}" for n in counts for c in columns] + (["serial"] if args.serial else [])

            def progress(r: int, got: list[list[FleetRun | None]]) -> None:
                line = "; ".join(
                    f"{name} FAILED"
                    if (g := runs[r]) is None
                    else f"{name} {g.wall_s:.1f} s ({g.controller_cpu_s / g.hosts:.2f} CPU-s/node"
                    + (f" + login {_login_cpu(g) / g.hosts:.2f}" if g.login else "")
                    + f", {g.peak_rss_mib:.0f} MiB, last node reached at {spread(g.fan.first_done)[1]:.2f} s)"
                    for name, runs in zip(names, got, strict=True)
                )
                print(f"  round {r + 1}: {line}", flush=True)

            failures: list[str] = []

            def tolerant(variant: Callable[[int], FleetRun]) -> Callable[[int], FleetRun | None]:
                def run(r: int) -> FleetRun | None:
                    try:
                        return variant(r)
                    except RunFailed as failed:
                        failures.append(f"round {r + 1}: {failed}")
                        print(f"  round {r + 1}: a run failed (its round is left out):\n{failed}", flush=True)
                        return None

                return run

            try:
                tried = interleave(args.rounds, [tolerant(v) for v in variants], progress)
            finally:
                cleanup()
    finally:
        server.server.stop()
        engine.release()
    # A round counts only when all its runs finished: the figures pair and line up the counts per round.
    whole = [r for r in range(args.rounds) if all(v[r] is not None for v in tried)]
    got = [[run for r, run in enumerate(v) if r in whole and run is not None] for v in tried]
    report.extra["failed_runs"] = [f.splitlines()[0] for f in failures]
    if failures:
        print(f"{len(failures)} run(s) failed; {len(whole)} of {args.rounds} rounds are whole and counted")
    if not whole:
        raise SystemExit("no round finished on every node: nothing to report")
    cores = len(os.sched_getaffinity(0))
    by_column = {c: {n: got[i * len(columns) + j] for i, n in enumerate(counts)} for j, c in enumerate(columns)}
    for column, runs in by_column.items():
        add_column(report, column, runs, cores)
    if args.slurm:
        add_ratios(report, by_column["ssh"], by_column["slurm"])
    if len(counts) >= 2:
        for column, runs in by_column.items():
            add_extrapolation(report, column, runs, args.extrapolate)
        report.extra["assumptions"] = assumptions(counts, args.extrapolate, args.slurm)
        print("extrapolation assumptions:\n  " + "\n  ".join(report.extra["assumptions"]))
    if args.serial:
        runs, serial = by_column["ssh"], got[-1]
        ratio = paired_ratios([g.wall_s for g in runs[largest]], [g.wall_s for g in serial])
        # The goal is stated for 16 hosts; with 4, even a perfect parallel run is 0.25.
        goal = Goal("<=", 0.25) if largest >= 16 else None
        report.add(figure(f"ssh {largest} nodes: ratio parallel/serial wall", ratio, goal=goal))
        # The VMs are containers on this machine: together they cannot run faster than their CPU work
        # spread over its cores. That floor, over the serial time, is the best ratio this machine allows.
        floor = paired_ratios([g.busy_s / cores for g in runs[largest]], [g.wall_s for g in serial])
        report.add(figure(f"ssh {largest} nodes: this machine's floor (CPU-bound parallel / serial)", floor))
        report.add(figure(f"ssh {largest} nodes: serial wall", [g.wall_s for g in serial], unit="s", digits=1))
        per_node = [g.controller_cpu_s / largest for g in serial]
        report.add(figure(f"ssh {largest} nodes: serial controller CPU per node", per_node, unit="CPU-s"))
    return report.finish(args.json)


def slurm_variants(
    engine: DockerEngine,
    repo: Path,
    counts: list[int],
    parameters: str,
    work: Path,
    runs_dir: Path | None,
    max_startups: int | None = None,
) -> tuple[list[Callable[[int], FleetRun]], Callable[[], None]]:
    """Start and provision the cluster; per count, the SSH run and the Slurm run on the same first N nodes."""
    from _fleet_slurm import inventory, login_meter, provision, slurm_argv, start_cluster

    largest = counts[-1]
    sshd = f"MaxStartups {max_startups}" if max_startups else "MaxStartups as shipped (10:30:100)"
    print(f"a Slurm cluster of {largest} compute nodes (+ login/controller; its sshd: {sshd}), provisioned once")
    cluster = start_cluster(engine, repo, largest, max_startups)
    try:
        provision(cluster, parameters, work)
        meter = login_meter(cluster)
    except BaseException:
        cluster.remove()
        raise
    print(
        f"same nodes, same work per count ({', '.join(map(str, counts))}): {PROFILE.name} re-checked, "
        "over SSH and through Slurm",
        flush=True,
    )
    out = runs_dir or work / "runs"

    def ssh(n: int) -> Callable[[int], FleetRun]:
        def run(r: int) -> FleetRun:
            names = cluster.node_names[:n]
            tag = f"ssh-{n}-{next(_COUNT)}"
            inv, known = inventory(cluster, names, work, tag)
            argv = ["run", "--profile", str(PROFILE), "--parameters", parameters, "--inventory", str(inv)]
            argv += ["--known-hosts", str(known), "--parallel", str(n), "--output-dir", str(out)]
            return run_controller(argv, work, tag, n, meter)

        return run

    def slurm(n: int) -> Callable[[int], FleetRun]:
        def run(r: int) -> FleetRun:
            argv = slurm_argv(cluster, cluster.node_names[:n], parameters, work)
            try:
                result = run_controller(argv, work, f"slurm-{n}-{next(_COUNT)}", n, meter)
            except RunFailed as failed:
                container = cluster.login.container
                said = container.logs(tail=30).decode(errors="replace") if container is not None else ""
                raise RunFailed(f"{failed}\nthe login node's sshd and daemons said (last lines):\n{said}") from None
            if cluster.queue():  # the run must leave nothing behind, or the next one would wait for it
                raise SystemExit(f"slurm: jobs left after the run: {cluster.queue()}")
            return result

        return run

    variants = [v for n in counts for v in (ssh(n), slurm(n))]
    return variants, cluster.remove


if __name__ == "__main__":
    sys.exit(main())
