"""Malformed and out-of-range input is refused with one message naming the place (exit 2), never
accepted silently and never an internal error: host URLs, numbers, timespans, duplicate JSON keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload.cli import invoke
from workload.errors import UsageError
from workload.hosts.base import parse_host_spec

FIX = Path(__file__).parent / "fixtures" / "results" / "nvidia" / "logs" / "2024.07.24-15.41.28"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ssh://[::1", "not a valid host URL"),
        ("ssh://h:0", "port is not a number between 1 and 65535"),
        ("ssh://h:２２", "port is not a number between 1 and 65535"),
        ("ssh://@h", "the user name is empty"),
        ("ssh://u@h/srv/x", "no path, query or fragment"),
        ("ssh://u@h?x=1", "no path, query or fragment"),
        ("ssh://u@h#frag", "no path, query or fragment"),
        ("ssh://u@h a", "is not a host name or IP address"),
        ("ssh://u@hé", "is not a host name or IP address"),
        ("local://elsewhere", "local:// names this machine"),
    ],
)
def test_malformed_host_urls_are_refused_with_the_reason(url: str, problem: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_host_spec(url)
    assert problem in str(info.value) and "--host" in str(info.value)


@pytest.mark.parametrize(
    ("url", "host", "port", "user"),
    [
        ("ssh://azureuser@10.0.0.4:2222", "10.0.0.4", 2222, "azureuser"),
        ("azureuser@vm-05.corp_net", "vm-05.corp_net", 22, "azureuser"),
        ("ssh://u@[::1]:2200", "::1", 2200, "u"),
        ("ssh://h/", "h", 22, None),
    ],
)
def test_good_host_urls_still_parse(url: str, host: str, port: int, user: str | None) -> None:
    spec = parse_host_spec(url)
    assert (spec.hostname, spec.port, spec.user) == (host, port, user)


def test_malformed_host_url_on_the_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["plan", "--profile", "PERF-CPU-MLPERF", "--host", "ssh://[::1"]) == 2
    assert "not a valid host URL" in capsys.readouterr().err


def test_inventory_port_in_fullwidth_digits_is_refused(tmp_path: Path) -> None:
    from workload.inventory import load_inventory

    path = tmp_path / "fleet.txt"
    path.write_text("ssh://u@10.0.0.4 port=２２\n")
    with pytest.raises(UsageError, match=r"fleet\.txt:1: port '２２' is not a number between 1 and 65535"):
        load_inventory(path)


def test_duplicate_keys_in_profile_and_inventory_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workload.inventory import load_inventory

    profile = tmp_path / "dup.json"
    profile.write_text('{"Description": "x", "Parameters": {"A": 1, "A": 2}}')
    assert invoke(["show", str(profile)]) == 2
    assert "dup.json: the key 'A' appears twice" in capsys.readouterr().err
    fleet = tmp_path / "fleet.json"
    fleet.write_text('{"hosts": [{"host": "u@h", "host": "u@other"}]}')
    with pytest.raises(UsageError, match="the key 'host' appears twice"):
        load_inventory(fleet)


@pytest.mark.parametrize(
    "parameter",
    ["OfflineTargetQps=inf", "OfflineTargetQps=-Infinity", "MinDurationMs=99999999999999999999999"],
)
def test_out_of_range_parameters_are_refused(parameter: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["show", "PERF-CPU-MLPERF", "--parameters", parameter]) == 2
    err = capsys.readouterr().err
    assert parameter.split("=")[0] in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["compare", str(FIX), str(FIX), "--threshold", "nan"],
        ["compare", str(FIX), str(FIX), "--threshold", "inf"],
        ["run", "--profile", "PERF-CPU-MLPERF", "--timeout", "nan"],
        ["run", "--profile", "PERF-CPU-MLPERF", "--timeout", "1e400"],
        ["doctor", "--min-free-gb", "nan"],
    ],
)
def test_non_finite_option_values_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(args) == 2
    err = capsys.readouterr().err
    assert "is not a finite number" in err or "is not in the range" in err


@pytest.mark.parametrize("timespan", ["99999999999.00:00:00", "１０:00:00", "00:00:01.123456789012345", "1.24:00:00"])
def test_out_of_range_timespans_are_refused(timespan: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"Description": "x", "MinimumExecutionInterval": timespan}))
    assert invoke(["show", str(profile)]) == 2
    assert "MinimumExecutionInterval" in capsys.readouterr().err
