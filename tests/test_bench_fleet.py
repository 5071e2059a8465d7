"""bench_fleet's arithmetic and tracer (bench/_fleet_stats.py, bench/_fleet_trace.py): no test bed needed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from workload.commands import Command
from workload.hosts.local import LocalHost

_BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


stats = _load("_fleet_stats")
tracer = _load("_fleet_trace")


def test_a_line_through_exact_points_is_found_and_read_further_out() -> None:
    line = stats.fit_line([(4, 10.0), (8, 14.0), (16, 22.0)])  # 6 + 1 per node
    assert line.fixed == pytest.approx(6.0)
    assert line.per_node == pytest.approx(1.0)
    assert line.at(1000) == pytest.approx(1006.0)


def test_least_squares_splits_the_difference_of_noisy_points() -> None:
    line = stats.fit_line([(4, 1.0), (4, 3.0), (8, 5.0), (8, 7.0)])  # means 2 at 4, 6 at 8
    assert line.per_node == pytest.approx(1.0)
    assert line.fixed == pytest.approx(-2.0)


def test_one_node_count_cannot_make_a_line() -> None:
    with pytest.raises(ValueError, match="two node counts"):
        stats.fit_line([(8, 1.0), (8, 2.0)])


def test_extrapolation_fits_each_round_on_its_own() -> None:
    rounds = [{4: 4.0, 8: 8.0}, {4: 5.0, 8: 13.0}]  # slopes 1 and 2
    lines, at = stats.extrapolate(rounds, 100)
    assert [line.per_node for line in lines] == pytest.approx([1.0, 2.0])
    assert at == pytest.approx([100.0, 197.0])


def test_fan_out_reads_latencies_after_the_fan_out_started() -> None:
    trace = {
        "run_start": 2.0,
        "operations": {"a": [[2.5, 3.0], [3.1, 3.2]], "b": [[4.0, 5.5]]},
        "steps": {"a": [[1, 3.0, 6.0], [2, 6.0, 7.0]], "b": [[1, 5.5, 9.0]]},
    }
    fan = stats.fan_out(trace)
    assert fan.startup_s == 2.0
    assert fan.first_sent == {"a": 0.5, "b": 2.0}
    assert fan.first_done == {"a": 1.0, "b": 3.5}
    assert fan.operations == {"a": 2, "b": 1}
    assert fan.steps[1] == {"a": (1.0, 3.0), "b": (3.5, 3.5)}
    assert fan.steps[2] == {"a": (4.0, 1.0)}
    assert stats.spread(fan.first_done) == (2.25, 3.5)


def test_a_step_run_twice_on_a_host_counts_from_its_first_start_to_its_last_end() -> None:
    trace = {"run_start": 0.0, "operations": {"a": [[0.1, 0.2]]}, "steps": {"a": [[1, 1.0, 2.0], [1, 5.0, 6.0]]}}
    assert stats.fan_out(trace).steps[1] == {"a": (1.0, 5.0)}


def test_a_run_that_never_reached_the_fan_out_is_refused() -> None:
    with pytest.raises(ValueError, match="never reached"):
        stats.fan_out({"run_start": None, "operations": {}, "steps": {}})


def test_the_tracer_records_a_real_hosts_commands_and_file_reads(tmp_path: Path) -> None:
    trace = tracer.Trace()
    host = tracer.trace_host(trace, LocalHost("here"))
    result = host.run(Command(("sh", "-c", "sleep 0.05; echo hi")))
    assert result.stdout.strip() == "hi"  # the wrapped host still does its job
    (tmp_path / "f").write_text("x")
    assert host.read_text(str(tmp_path / "f")) == "x"
    ops = trace.as_dict()["operations"]["here"]
    assert len(ops) == 2
    (start, end), _ = ops
    assert end - start >= 0.05  # the command's own length is inside its record


def test_an_operation_made_of_others_is_recorded_once(tmp_path: Path) -> None:
    class Nested(LocalHost):
        def read_bytes(self, path: str) -> bytes:  # a file read done as a command, as SlurmHost does
            return self.run(Command(("cat", path))).stdout.encode()

    trace = tracer.Trace()
    host = tracer.trace_host(trace, Nested("here"))
    (tmp_path / "f").write_text("x")
    assert host.read_bytes(str(tmp_path / "f")) == b"x"
    host.run(Command(("true",)))
    assert len(trace.as_dict()["operations"]["here"]) == 2
