"""Inventory files (``--inventory``): the text and JSON formats, labels, and errors that name file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload.cli import invoke
from workload.errors import UsageError
from workload.inventory import load_inventory, strip_comment


def write(tmp_path: Path, text: str | bytes, name: str = "fleet.txt") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# -- the text format -----------------------------------------------------------------------------


def test_text_format_hosts_options_and_labels(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "# the fleet\n"
        "\n"
        "ssh://azureuser@10.0.0.4      key=~/.ssh/mlperf  sku=ND96isr_H100_v5  rack=r12\n"
        "   azureuser@10.0.0.5:2222    name=vm-05   # a comment after the options\n"
        "10.0.0.6  user=ubuntu port=2200 'note=two words'\n"
        "local://\n",
    )
    first, second, third, local = load_inventory(path)
    assert (first.hostname, first.user, first.port, first.name) == ("10.0.0.4", "azureuser", 22, "10.0.0.4")
    assert first.key_filename == str(Path("~/.ssh/mlperf").expanduser())
    assert first.labels == {"sku": "ND96isr_H100_v5", "rack": "r12"}
    assert (second.port, second.name, second.labels) == (2222, "vm-05", {})
    assert (third.user, third.port, third.name, third.labels) == (
        "ubuntu",
        2200,
        "10.0.0.6:2200",
        {"note": "two words"},
    )
    assert local.scheme == "local" and local.name == "local"
    # Each spec remembers its line, so later checks (a missing key file) can name it.
    assert [s.source for s in (first, second, third, local)] == [f"{path}:{n}" for n in (3, 4, 5, 6)]


def test_a_hash_inside_a_value_is_not_a_comment(tmp_path: Path) -> None:
    (spec,) = load_inventory(write(tmp_path, "ssh://u@h  rack=r#12 'room=a # b'  # real comment\n"))
    assert spec.labels == {"rack": "r#12", "room": "a # b"}


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("# all comment", ""),
        ("a b # c", "a b "),
        ("a\t# c", "a\t"),
        ("rack=r#12", "rack=r#12"),
        ("x='a # b' # c", "x='a # b' "),
        ('x="a # b"', 'x="a # b"'),
        ("x=a\\ #b", "x=a\\ #b"),
    ],
)
def test_strip_comment(line: str, kept: str) -> None:
    assert strip_comment(line) == kept


def test_password_env_reads_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WL_TEST_VM_PASSWORD", "pw-inventory-1")
    (spec,) = load_inventory(write(tmp_path, "ssh://u@h password_env=WL_TEST_VM_PASSWORD\n"))
    assert spec.password is not None and spec.password.value == "pw-inventory-1"
    assert "password_env" not in spec.labels and "pw-inventory-1" not in repr(spec)


# -- the JSON format -----------------------------------------------------------------------------


def test_json_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WL_TEST_VM_PASSWORD", "pw-json-1")
    document = {
        "hosts": [
            {"host": "ssh://azureuser@10.0.0.4", "key": "/keys/a", "labels": {"rack": "r12", "gpus": 8, "nvl": True}},
            {
                "host": "10.0.0.5",
                "user": "ubuntu",
                "port": 2222,
                "name": "vm-05",
                "password_env": "WL_TEST_VM_PASSWORD",
            },
        ]
    }
    path = write(tmp_path, json.dumps(document, indent=2), name="fleet.json")
    first, second = load_inventory(path)
    assert (first.user, first.key_filename, first.labels) == (
        "azureuser",
        "/keys/a",
        {"rack": "r12", "gpus": "8", "nvl": "true"},
    )
    assert (second.user, second.port, second.name) == ("ubuntu", 2222, "vm-05")
    assert second.password is not None and second.password.value == "pw-json-1"
    assert first.source == f"{path}: hosts[0]"


# -- errors name the file and the line -----------------------------------------------------------

TEXT_ERRORS = [
    ("ssh://root@h port=abc\n", ":1: port 'abc' is not a number between 1 and 65535"),
    ("\nssh://root@h port=99999\n", ":2: port '99999' is not a number between 1 and 65535"),
    ("ssh://root@h port=0\n", ":1: port '0' is not a number between 1 and 65535"),
    ("ssh://root@h:70000\n", ":1: host 'ssh://root@h:70000': the port is not a number between 1 and 65535"),
    ("ssh://root@h rack\n", ":1: 'rack' is not key=value"),
    ('ssh://root@h "unterminated\n', ":1: No closing quotation"),
    ("# c\nftp://x\n", ":2: host 'ftp://x': unknown scheme 'ftp'"),
    ("ssh://root@h rack=a rack=b\n", ":1: rack= is given twice"),
    ("ssh://root@h password=hunter2\n", ":1: password=: a password does not belong in an inventory file"),
    ("ssh://root:hunter2@h\n", ":1: host 'ssh://root:***@h': a password in the host URL"),
    ("ssh://root@h password_env=WL_TEST_UNSET_VARIABLE\n", ":1: password_env WL_TEST_UNSET_VARIABLE: the environment"),
    ("ssh://root@h password_env=not-a-name\n", ":1: password_env 'not-a-name': not an environment variable name"),
]


@pytest.mark.parametrize(("text", "message"), TEXT_ERRORS, ids=[m for _, m in TEXT_ERRORS])
def test_text_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as info:
        load_inventory(path)
    assert f"{path}{message}" in str(info.value)
    assert "hunter2" not in str(info.value)


JSON_ERRORS = [
    ('{"hosts": [1, 2', ":1: column 16: invalid JSON"),
    ('{"hosts": "x"}', ': expected an object with a "hosts" array'),
    ('{"hosts": [{"user": "x"}]}', ': hosts[0]: each host needs a "host" string'),
    ('{"hosts": [{"host": "h", "port": "x"}]}', ": hosts[0]: port 'x' is not a number between 1 and 65535"),
    ('{"hosts": [{"host": "h", "port": 65536}]}', ": hosts[0]: port 65536 is not a number between 1 and 65535"),
    ('{"hosts": [{"host": "h", "port": true}]}', ": hosts[0]: port True is not a number"),
    ('{"hosts": [{"host": "h", "prot": 22}]}', ": hosts[0].prot: unknown key"),
    ('{"hosts": [{"host": "h", "labels": []}]}', ": hosts[0].labels: must be an object"),
    ('{"hosts": [{"host": "h", "labels": {"a": [1, 2]}}]}', ": hosts[0]: label 'a' must be a text, number or boolean"),
    ('{"hosts": [{"host": "h", "labels": {"port": 1}}]}', ": hosts[0].labels.port: 'port' is a host option"),
    ('{"hosts": [{"host": "h", "user": 5}]}', ": hosts[0]: user must be a non-empty text"),
]


@pytest.mark.parametrize(("text", "message"), JSON_ERRORS, ids=[m for _, m in JSON_ERRORS])
def test_json_errors_name_file_and_entry(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text, name="fleet.json")
    with pytest.raises(UsageError) as info:
        load_inventory(path)
    assert f"{path}{message}" in str(info.value), str(info.value)


def test_duplicate_hosts_name_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "ssh://u@10.0.0.4\nssh://v@10.0.0.5\nssh://w@10.0.0.4:22\n")
    with pytest.raises(UsageError) as info:
        load_inventory(path)
    assert f"{path}:3: host 10.0.0.4 is listed twice (first at {path}:1)" in str(info.value)
    assert "name=" in str(info.value)
    # Two accounts on one machine are fine once each has its own name.
    write(tmp_path, "ssh://u@10.0.0.4 name=a\nssh://w@10.0.0.4 name=b\n")
    assert [s.name for s in load_inventory(path)] == ["a", "b"]


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no hosts in the file"):
        load_inventory(write(tmp_path, "# only a comment\n\n"))
    with pytest.raises(UsageError, match="cannot read the file"):
        load_inventory(tmp_path / "missing.txt")


def test_non_utf8_file_is_a_usage_error_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, b"ssh://u@h1\nssh://u@h2 rack=\xff\xfe\n")
    with pytest.raises(UsageError) as info:
        load_inventory(path)
    assert f"{path}:2: the file is not UTF-8 text" in str(info.value)
    # Through the command line: exit 2 (bad input), not an internal error.
    assert invoke(["plan", "--profile", "PERF-CPU-MLPERF", "--inventory", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8" in err and "internal error" not in err


# -- checks before anything starts (build_targets) -----------------------------------------------


def test_missing_key_files_are_usage_errors_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    inventory = write(tmp_path, "# fleet\nssh://root@127.0.0.1 key=/nonexistent/key\n")
    assert (
        invoke(["run", "--profile", "PERF-CPU-MLPERF", "--inventory", str(inventory), "--output-dir", str(runs)]) == 2
    )
    err = capsys.readouterr().err
    assert f"{inventory}:2: key=/nonexistent/key: no such key file" in err and "--host" not in err
    assert not runs.exists()  # nothing started, no run folder
    argv = ["run", "--profile", "PERF-CPU-MLPERF", "--host", "ssh://root@127.0.0.1", "-i", "/nonexistent"]
    assert invoke([*argv, "--output-dir", str(runs)]) == 2
    assert "-i/--identity /nonexistent: no such key file" in capsys.readouterr().err
    assert not runs.exists()


def test_unset_password_variables_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--profile", "PERF-CPU-MLPERF", "--host", "ssh://u@127.0.0.1"]
    assert invoke([*argv, "--ssh-password-env", "WL_TEST_UNSET_VARIABLE"]) == 2
    err = capsys.readouterr().err
    assert "--ssh-password-env WL_TEST_UNSET_VARIABLE: the environment variable" in err
