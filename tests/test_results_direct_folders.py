"""`workload results` pointed straight at a compliance ``TEST0x`` folder or a power ``performance/ranging`` folder of a
published tree (issue 31): each is read as what it is, no message says a present file is absent, and a line that says
``error:`` never comes with exit 0. Also the System column of the table (two systems' rows told apart) and the system
in the JSON lines, metrics.csv and summary.json.

The folders are real published ones (tests/fixtures/results/published_mirrors/SOURCES, trees/SOURCES); a ranging
folder is made in ``tmp_path`` from a real run's logs, as ``submission_structure.md`` of MLCommons' checker lays it
out (``<scenario>/performance/ranging/mlperf_log_{summary,detail}.txt``).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from workload.cli import invoke
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"
MIRRORS = FIX / "published_mirrors"
#: v6.0, the v5.1+ layout: TEST01 under results/ with the compliance run's logs, its verify files in compliance/TEST01
DELL_RGAT = MIRRORS / "v6.0/closed/Dell/results/1-node-2S-GNR_86C/rgat/Offline"
#: v4.1 layout: compliance/<system>/<benchmark>/<scenario>/TEST0x with the verify files
ASUS_BERT = FIX / "trees/v4.1/closed/ASUSTeK/compliance/ESC4000A_E12_4XH100_TRT/bert-99/Offline"
#: TEST09 (v6.0 results/ layout) with only verify_output_len.txt
AMD_TEST09 = MIRRORS / "v6.0/closed/AMD/results/8xMI355X_2xEPYC_9575F/gpt-oss-120b/Server/TEST09"
#: TEST04 of an open wan-2.2 result (verify_performance.txt only)
AMD_WAN_TEST04 = MIRRORS / "v6.0/open/AMD/results/8xMI355X_2xEPYC_9597F/wan-2.2-t2v-a14b/SingleStream/TEST04"
#: a TEST06 folder holding only a hash-only accuracy.txt (its verify file is not in the mirror)
CISCO_TEST06 = MIRRORS / "v5.1/closed/Cisco/compliance/HGX-H100_H100-SXM-80GBx16_TRT/llama3_1-405b/Offline/TEST06"


def results(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the real CLI entry (as the console script does): (exit code, stdout, stderr)."""
    code = invoke(["results", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_test01_folder_of_the_results_layout_is_read_as_its_compliance_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = results(capsys, str(DELL_RGAT / "TEST01"))
    assert code == 0, err
    assert "no MLPerf results found" not in err
    row = next(line for line in out.splitlines() if "rgat" in line)
    assert "TEST01 perf" in row and "14,153.50 samples/s" in row and "VALID" in row and "1-node-2S-GNR_86C" in row


def test_a_test01_folder_with_verify_files_gives_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = results(capsys, str(ASUS_BERT / "TEST01"))
    assert code == 0, err
    rows = [line for line in out.splitlines() if "bert-99" in line]
    assert len(rows) == 1 and "TEST01" in rows[0] and "VALID" in rows[0]


@pytest.mark.parametrize(("folder", "benchmark"), [(AMD_TEST09, "gpt-oss-120b"), (AMD_WAN_TEST04, "wan-2.2-t2v-a14b")])
def test_test04_and_test09_folders_are_read(capsys: pytest.CaptureFixture[str], folder: Path, benchmark: str) -> None:
    code, out, err = results(capsys, str(folder))
    assert code == 0, err
    assert any(benchmark in line and folder.name in line for line in out.splitlines())


def test_a_test01_folder_with_verify_files_and_its_run_gives_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The verdict (verify files) and the compliance run's own LoadGen result: two rows, each named for what it is."""
    test01 = tmp_path / "closed/Dell/results/1-node-2S-GNR_86C/rgat/Offline/TEST01"
    shutil.copytree(DELL_RGAT / "TEST01", test01)
    shutil.copy(DELL_RGAT / "compliance/TEST01/verify_performance.txt", test01)
    collection = collect(test01)
    assert not collection.issues
    modes = sorted((r.test_mode, r.validity) for r in collection.results)
    assert modes == [("PerformanceOnly", "VALID"), ("TEST01", "VALID")]
    code, out, _ = results(capsys, str(test01))
    assert code == 0 and "TEST01 perf" in out


def test_a_compliance_folder_with_nothing_to_judge_is_an_error_that_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = results(capsys, str(CISCO_TEST06))
    assert code == 2
    assert "no MLPerf results found" not in err  # accuracy.txt is there: the message must not say it is absent
    assert "without a verify file" in err and "no verdict" in err and "see the warnings above" in err


def ranging_tree(tmp_path: Path) -> Path:
    """``<system>/rgat/Offline/performance/ranging`` made of a real run's logs (a power submission's layout)."""
    scenario = tmp_path / "closed/Dell/results/1-node-2S-GNR_86C/rgat/Offline"
    shutil.copytree(DELL_RGAT / "TEST01/performance/run_1", scenario / "performance/ranging")
    return scenario


def test_a_ranging_folder_pointed_at_is_the_ranging_run_of_its_benchmark(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = ranging_tree(tmp_path)
    code, out, err = results(capsys, str(scenario / "performance/ranging"))
    assert code == 0, err
    row = next(line for line in out.splitlines() if "samples/s" in line)
    assert "rgat" in row and "ranging perf" in row and "ranging " not in row.split("│")[2]  # benchmark is rgat


def test_a_tree_with_only_a_ranging_run_reads_it_instead_of_saying_nothing_is_there(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ranging_tree(tmp_path)
    code, out, err = results(capsys, str(tmp_path))
    assert code == 0 and "no MLPerf results found" not in err
    assert "ranging perf" in out


def test_a_ranging_run_beside_the_performance_run_is_not_a_second_result(tmp_path: Path) -> None:
    scenario = ranging_tree(tmp_path)
    shutil.copytree(DELL_RGAT / "TEST01/performance/run_1", scenario / "performance/run_1")
    found = collect(tmp_path)
    assert [Path(r.source).name for r in found.results] == ["run_1"]


@pytest.mark.parametrize(
    "args",
    [
        ("/nonexistent/results/folder",),
        (str(CISCO_TEST06),),
        (str(FIX / "trees" / "SOURCES"),),  # a file that is no result file
        (str(ASUS_BERT / "TEST01"), "--round", "v9.9"),
    ],
)
def test_an_error_line_never_comes_with_exit_0(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, err = results(capsys, *args)
    assert "error:" in err + out
    assert code != 0


def test_the_table_tells_two_systems_of_one_benchmark_apart(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for system in ("SystemA_H100x8", "SystemB_H200x8"):
        shutil.copytree(DELL_RGAT / "TEST01/performance/run_1", tmp_path / system / "rgat/Offline/performance/run_1")
    code, out, _ = results(capsys, str(tmp_path))
    assert code == 0
    header = next(line for line in out.splitlines() if "Benchmark" in line)
    assert header.index("System") < header.index("Benchmark")
    rows = [line for line in out.splitlines() if "rgat" in line]
    assert len(rows) == 2 and "SystemA_H100x8" in rows[0] and "SystemB_H200x8" in rows[1]


def test_json_csv_and_summary_carry_the_system(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = results(capsys, str(DELL_RGAT / "TEST01"), "--json")
    assert code == 0
    assert {json.loads(line)["metadata"]["system"] for line in out.splitlines()} == {"1-node-2S-GNR_86C"}
    collection = collect(DELL_RGAT / "TEST01")
    write_outputs(tmp_path, collection.results, OutputContext())
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open(encoding="utf-8")))
    assert rows and all("system=1-node-2S-GNR_86C" in row["Metadata"] for row in rows)
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert [r["system"] for r in summary["results"]] == ["1-node-2S-GNR_86C"]


def test_the_grouped_table_keeps_systems_apart() -> None:
    """Past MAX_ROWS results the table has a row per (host, system, benchmark, scenario, mode)."""
    from rich.console import Console

    from workload.metrics.collection import Collection
    from workload.metrics.table import MAX_ROWS, render_table

    (result,) = collect(DELL_RGAT / "TEST01").results
    many = [result.model_copy(update={"system": f"Sys{i % 2}"}) for i in range(MAX_ROWS + 1)]
    console = Console(width=200, record=True)
    console.print(render_table(Collection(results=many)))
    text = console.export_text()
    rows = [line for line in text.splitlines() if "rgat" in line]
    assert len(rows) == 2 and "Sys0" in rows[0] and "Sys1" in rows[1]
    assert "51" in rows[0] and "50" in rows[1]  # the count of each group
