"""Issue 16: files written safely (no symlink clobbering), host folders one-to-one, output folders reused.

Every test plants what an attacker or an earlier run could leave in a folder ``workload`` writes to,
and checks the real writers (``write_outputs``, the run folder, step logs, ``results --output``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.cli.results_cmd import results_command
from workload.errors import ResultsError
from workload.hosts.local import LocalHost
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, load_run, write_outputs
from workload.rundir import RunFolder

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
OFFLINE = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


def _plant(folder: Path, names: list[str], victim: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.symlink(victim, folder / name)


# -- 1. symlink clobbering ------------------------------------------------------------------------
def test_write_outputs_never_writes_through_planted_links(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    pid = os.getpid()
    # every name the writers used to open: the lock file and the predictable temporaries
    files = ("metrics.jsonl", "metrics.csv", "summary.json")
    planted = [".metrics.lock"] + [f".{name}.{pid}{kind}.tmp" for name in files for kind in ("", ".child")]
    _plant(out, planted, victim)
    write_outputs(out, collect(OFFLINE, host="h1").results, OutputContext())
    assert victim.read_text() == "precious\n"
    assert json.loads((out / "summary.json").read_text())["counts"]["results"] == 1
    # nothing of ours is left behind: no lock file, no temporaries
    left = {p.name for p in out.iterdir()} - set(planted)
    assert left == {"metrics.jsonl", "metrics.csv", "summary.json"}


def test_write_outputs_replaces_a_link_at_the_target_instead_of_following_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "out"
    _plant(out, ["metrics.csv"], victim)
    write_outputs(out, collect(OFFLINE, host="h1").results, OutputContext())
    assert victim.read_text() == "precious\n"
    assert not (out / "metrics.csv").is_symlink() and (out / "metrics.csv").read_text().startswith('"Timestamp"')


def test_run_folder_json_and_logs_never_follow_links(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    folder = RunFolder.create(tmp_path / "runs", "P")
    _plant(folder.root, ["run.json.tmp", "profile.json.tmp"], victim)
    folder.write_json("run.json", {"a": 1})
    assert victim.read_text() == "precious\n" and json.loads((folder.root / "run.json").read_text()) == {"a": 1}
    from workload.safefile import append_text

    log = folder.host_dir("h1") / "host.log"
    os.symlink(victim, log)
    with pytest.raises(OSError):
        append_text(log, "line\n")
    assert victim.read_text() == "precious\n"
    # a link planted in place of a host folder is refused, not written into
    os.symlink(tmp_path, folder.root / "h2")
    with pytest.raises(FileExistsError):
        folder.host_dir("h2")


def test_local_host_state_write_replaces_links(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    state = tmp_path / "state.json"
    os.symlink(victim, state)
    LocalHost().write_text(str(state), "{}\n")
    assert victim.read_text() == "precious\n" and state.read_text() == "{}\n" and not state.is_symlink()


def test_safe_helpers_keep_mode_and_lock_the_folder_without_a_file(tmp_path: Path) -> None:
    from workload.safefile import atomic_write_text, locked_folder

    target = tmp_path / "f"
    target.write_text("x")
    target.chmod(0o640)
    atomic_write_text(target, "y")
    assert target.read_text() == "y" and (target.stat().st_mode & 0o777) == 0o640
    before = set(tmp_path.iterdir())
    with locked_folder(tmp_path):
        pass
    assert set(tmp_path.iterdir()) == before
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")  # an output folder the user names through a link
    with locked_folder(tmp_path / "link"):
        pass
    assert list((tmp_path / "real").iterdir()) == []
    with pytest.raises(NotADirectoryError), locked_folder(target):
        pass


# -- 4. host folder names -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "names",
    [
        ["a:b", "a_b", "a/b", "a b", "_a_b_"],
        ["ü", "é", "東京", "ñ"],
        ["..", ".", "...", "_", ".hidden"],
        ["10.0.0.4:2222", "10.0.0.4_2222"],
    ],
)
def test_host_folder_names_are_unique_and_inside_the_run_folder(tmp_path: Path, names: list[str]) -> None:
    folder = RunFolder.create(tmp_path / "runs", "P")
    dirs = [folder.host_dir(name) for name in names]
    assert len({d.name for d in dirs}) == len(names)
    for directory in dirs:
        assert directory.parent == folder.root and directory.name not in (".", "..") and directory.is_dir()
        assert "/" not in directory.name


def test_plain_host_names_keep_their_folder_and_others_stay_readable() -> None:
    from workload.rundir import host_folder_name

    assert host_folder_name("vm-07") == "vm-07" and host_folder_name("10.0.0.4") == "10.0.0.4"
    assert re.fullmatch(r"10\.0\.0\.4_2222~[0-9a-f]{16}", host_folder_name("10.0.0.4:2222"))
    # a name that looks like a changed one cannot take its folder: '~' is never kept as it is
    changed = host_folder_name("a:b")
    assert host_folder_name(changed) != changed


def test_results_of_a_run_folder_come_back_per_host_from_the_new_folder_names(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path / "runs", "P")
    import shutil

    for name in ("a:b", "a_b"):
        shutil.copytree(OFFLINE, folder.host_dir(name) / "results")
    folder.write_json("run.json", {"hosts": [{"name": "a:b"}, {"name": "a_b"}]})
    collection = load_run(folder.root)
    assert sorted(r.host or "" for r in collection.results) == ["a:b", "a_b"]


# -- 7. results --output into a folder used before -----------------------------------------------
def _results(*args: str) -> tuple[int, str]:
    group = click.Group("workload")
    group.add_command(results_command)
    result = CliRunner().invoke(group, ["results", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_results_output_reused_says_what_it_replaces_and_keeps_other_hosts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, text = _results(str(OFFLINE), "--host", "n1", "--output", str(out))
    assert code == 0 and "replaced" not in text
    code, text = _results(str(OFFLINE), "--host", "n2", "--output", str(out))
    assert code == 0 and "replaced" not in text
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(e["host"] for e in summary["results"]) == ["n1", "n2"]
    code, text = _results(str(H200), "--host", "n1", "--output", str(out))
    assert code == 0
    assert "held 1 result(s) of the same host(s)" in text and "replaced" in text
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(e["host"] for e in summary["results"]) == ["n1", "n1", "n1", "n2"]


@pytest.mark.parametrize(
    "content",
    [b"[1]", b'{"results": 5}', b'{"results": [{"host": "h", "model": 5}]}', b'{"issues": ["x"]}', b"\xff{", b"{"],
)
def test_malformed_summary_in_output_folder_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_bytes(content)
    code, text = _results(str(OFFLINE), "--output", str(out))
    assert code == 2, text
    assert "summary.json" in text and "not a summary.json this tool wrote" in text and "Traceback" not in text
    assert (out / "summary.json").read_bytes() == content  # left as it was
    assert not (out / "metrics.jsonl").exists()
    with pytest.raises(ResultsError):
        write_outputs(out, collect(OFFLINE).results, OutputContext())


def test_a_host_named_like_a_folder_of_the_run_gets_its_own_folder() -> None:
    from workload.rundir import RUN_FOLDER_NAMES, host_folder_name

    for name in RUN_FOLDER_NAMES:
        assert host_folder_name(name) != name and host_folder_name(name).startswith(f"{name}~")
    assert host_folder_name("telemetry-1") == "telemetry-1"
