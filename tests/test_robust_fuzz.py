"""Fuzzing the input surfaces: whatever comes in, the answer is a result or one clear error.

Never exit 1 (internal error) and never a traceback: host URLs, inventories (text and JSON),
--parameters, profiles (random JSON documents and mutations of the shipped ones), timespans,
option values, and text printed on the console (rich markup characters above all).
"""

from __future__ import annotations

import json
import os
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from workload.cli import invoke
from workload.errors import WorkloadError
from workload.hosts.base import parse_host_spec

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ROOT = Path(__file__).resolve().parent.parent
SHIPPED = json.loads((ROOT / "profiles" / "PERF-CPU-MLPERF.json").read_text())

#: Characters that break parsers: URL and inventory syntax, markup, quoting, controls, non-ASCII digits.
NASTY = "[]/@:?#%=,;\"'\\ \t\n\r\x00\x1b$`*{}()<>|&~!-." + "２٣\u00e9\u202e\udcff"
nasty_text = st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + NASTY), max_size=40)
any_text = st.one_of(nasty_text, st.text(max_size=40))


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = invoke(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_clean(code: int, out: str) -> None:
    assert code != 1, out
    assert "Traceback" not in out and "internal error" not in out, out


@FUZZ
@given(st.one_of(any_text, st.builds(lambda a, b: f"ssh://{a}@{b}", nasty_text, nasty_text)))
def test_host_urls_parse_or_give_a_usage_error(text: str) -> None:
    try:
        spec = parse_host_spec(text)
    except WorkloadError as exc:
        assert "--host" in str(exc)
        return
    if spec.scheme == "ssh":
        assert spec.hostname and 1 <= spec.port <= 65535
        assert spec.hostname.isascii() and not any(c in spec.hostname for c in " /@?#\t\n")


@FUZZ
@given(st.lists(st.one_of(any_text, st.builds(lambda k, v: f"{k}={v}", nasty_text, nasty_text)), max_size=6))
def test_inventory_text_files_load_or_name_the_line(lines: list[str]) -> None:
    from workload.inventory import load_inventory

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
        try:
            load_inventory(path)
        except WorkloadError as exc:
            assert "fleet.txt" in str(exc)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(json_values)
def test_inventory_json_files_load_or_name_the_entry(document: object) -> None:
    from workload.inventory import load_inventory

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.json"
        text = json.dumps({"hosts": document} if not isinstance(document, dict) else document)
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            load_inventory(path)
        except WorkloadError as exc:
            assert "fleet.json" in str(exc)


@FUZZ
@given(st.lists(st.one_of(nasty_text, st.builds(lambda k, v: f"{k}={v}", nasty_text, any_text)), max_size=3))
def test_parameters_never_crash_show(capsys: pytest.CaptureFixture[str], texts: list[str]) -> None:
    args = ["show", "PERF-CPU-MLPERF"]
    for text in texts:
        args += ["--parameters", text]
    code, out = cli(args, capsys)
    assert_clean(code, out)
    assert code in (0, 2)


@FUZZ
@given(
    st.sampled_from(
        [
            "MinDurationMs",
            "SampleCount",
            "OfflineTargetQps",
            "ServerTargetLatencyMs",
            "Threads",
            "AccuracyThreshold",
            "FindPeakPerformance",
            "Scenarios",
        ]
    ),
    st.one_of(
        st.integers(), st.floats().map(repr), st.sampled_from(["inf", "-inf", "nan", "1e999", "１２", "0x10", "1_000"])
    ),
)
def test_numeric_parameters_in_or_out_of_range(capsys: pytest.CaptureFixture[str], name: str, value: object) -> None:
    code, out = cli(["show", "PERF-CPU-MLPERF", "--parameters", f"{name}={value}"], capsys)
    assert_clean(code, out)
    assert code in (0, 2)


@st.composite
def mutated_profiles(draw: st.DrawFn) -> object:
    """The shipped CPU profile with one place replaced by a random JSON value, or any JSON value."""
    if draw(st.booleans()):
        return draw(json_values)
    document = json.loads(json.dumps(SHIPPED))
    target = draw(st.sampled_from(["top", "Parameters", "action", "action-params"]))
    value = draw(json_values)
    key = draw(
        st.one_of(st.sampled_from(["Description", "Type", "Parameters", "MinDurationMs", "Scenarios"]), any_text)
    )
    if target == "top":
        document[key] = value
    elif target == "Parameters":
        document["Parameters"][key] = value
    elif target == "action":
        document["Actions"][0][key] = value
    else:
        document["Actions"][0]["Parameters"][key] = value
    return document


@FUZZ
@given(mutated_profiles(), st.booleans())
def test_profiles_resolve_or_name_the_place(capsys: pytest.CaptureFixture[str], document: object, raw: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.json"
        text = json.dumps(document)
        if raw:  # duplicate a key, cut the text, or add bytes that are not UTF-8
            text = text.replace('{"', '{"Description": "dup", "', 1) if "{" in text else text[: len(text) // 2]
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        code, out = cli(["show", str(path)], capsys)
    assert_clean(code, out)
    assert code in (0, 2)


@FUZZ
@given(st.one_of(any_text, st.builds("{}:{}:{}".format, st.integers(-5, 10**12), st.integers(-5, 99), any_text)))
def test_timespans_parse_or_raise_value_error(text: str) -> None:
    from workload.profile import parse_timespan

    try:
        seconds = parse_timespan(text)
    except ValueError:
        return
    assert 0 <= seconds < 10_675_200 * 86400


@FUZZ
@given(
    st.sampled_from(
        [
            [
                "compare",
                str(ROOT / "tests/fixtures/results/cpu"),
                str(ROOT / "tests/fixtures/results/cpu"),
                "--threshold",
            ],
            ["run", "--profile", "PERF-CPU-MLPERF", "--dependencies", "--timeout"],
            ["run", "--profile", "PERF-CPU-MLPERF", "--dependencies", "--iterations"],
            ["run", "--profile", "PERF-CPU-MLPERF", "--dependencies", "--parallel"],
            ["doctor", "--host", "ssh://u@127.0.0.1:1", "--min-free-gb"],
        ]
    ),
    st.one_of(nasty_text, st.floats().map(repr), st.integers().map(str)),
)
def test_option_values_are_accepted_or_refused_cleanly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], value: str
) -> None:
    if args[0] == "run":
        args = [*args[:-1], "--output-dir", str(tmp_path / "runs"), args[-1]]
    if args[0] == "doctor" or value.strip() not in ("", "-"):
        # run/doctor with a valid value would do real work: only values that must be refused run whole.
        from workload.cli.numbers import FiniteFloatRange

        if args[0] == "doctor":
            try:
                FiniteFloatRange(0).convert(value, None, None)
            except Exception:
                pass
            else:
                return
    code, out = cli([*args, value], capsys)
    assert_clean(code, out)


@FUZZ
@given(st.lists(any_text, min_size=1, max_size=4))
def test_console_text_is_printed_literally(texts: list[str]) -> None:
    from tests.steptypes import EchoParameters, EchoStep
    from workload.cli.console import ConsoleReporter, hosts_table, styled
    from workload.engine import HostOutcome, StepOutcome
    from workload.errors import StepError

    console = Console(record=True, width=400, markup=True, file=open(os.devnull, "w", errors="backslashreplace"))  # noqa: SIM115  (as invoke() sets stdout)
    try:
        hosts = list(dict.fromkeys(texts))
        reporter = ConsoleReporter(console, hosts=hosts, verbose=1)
        step = EchoStep(EchoParameters(Scenario=texts[0] or "s"), location="Actions[0]", kind="action")
        for host in hosts:
            reporter.step_started(host, step)
            reporter.line(host, texts[-1])
            reporter.step_finished(host, step, StepOutcome(step.label, "failed", message=texts[-1]))
            reporter.host_finished(host, HostOutcome(host, "failed", error=StepError(texts[0], texts[-1], host=host)))
        console.print(styled(("x", "red"), *texts))
        console.print(hosts_table([HostOutcome(h, "ok") for h in hosts], {h: texts[0] for h in hosts}))
        shown = console.export_text()
    finally:
        console.file.close()
    for text in texts:
        printable = text.strip()
        if printable and printable.isprintable() and "\n" not in text:
            assert printable in shown
