"""Differential test (issue 31): MLCommons' real submission checker and ``workload results`` on the same v6.1 tree.

The checker is run from ``../shared/upstream/mlcommons-inference/tools/submission`` (``$WORKLOAD_UPSTREAM``; not
copied) as ``python -m submission_checker.main --input TREE --version v6.1 --csv CSV``. It judges complete trees
only, so the test builds the minimal complete tree it accepts from the endpoints fixtures: every required scenario
of each benchmark, ``systems/<system>.json``, a ``src`` folder, and ``measurements.json`` and ``README.md`` in each
scenario folder (measurements_checks.py), nothing else. Variants of the real results (one changed field each, in
a system of their own so that every other rule still holds) exercise the rules that reject a run.

Per result the checker gives: in the log ``Results <path> <value>`` (every check passed: valid) or ``NoResults
<path>``; in the CSV the ``Result``, ``Units`` and ``Accuracy``. They are compared with workload's headline value
(scaled as the checker scales it), headline unit, validity and accuracy verdict. Every disagreement must be one of
:data:`EXPLAINED` (a checker bug workload refuses to copy, named with its line); the table is printed (``-s``).

Fixtures: tests/fixtures/endpoints/SOURCES (real published NVIDIA v6.1 folders; wan-2.2 and qwen3.6-27b, which no
published v6.1 folder covers, made here in the client's format).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.upstream import CHECKER_TOOLS, unavailable, upstream_root
from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "endpoints" / "v6.1" / "closed" / "NVIDIA"
REAL_SERVER = FIX / "results" / "trees" / "v6.1" / "closed" / "NVIDIA"  # deepseek-r1 Server (trees/SOURCES)
MADE = FIX / "endpoints" / "made" / "v6.1" / "closed" / "Example"
NV_SYSTEM = "VR-NVL72_VR-288GB_aarch64x72_TRT"
DSR1, QWEN, WAN, QWEN36 = "deepseek-r1", "qwen3-vl-235b-a22b", "wan-2.2-t2v-a14b", "qwen3.6-27b"
GPT_OSS, LLAMA_EDGE = "gpt-oss-120b", "llama3.1-8b-edge"
MEASUREMENTS = REAL_SERVER / "results" / NV_SYSTEM / DSR1 / "Server" / "measurements.json"
#: MS_TO_NS / S_TO_MS of the checker (performance_check.py get_performance_metric_check)
_NS_PER = {"Latency (ms)": 1e6, "Latency (s)": 1e9}
#: what a unit measures, in both vocabularies (the checker's UNIT_DICT/SPECIAL_UNIT_DICT, workload's metric units)
_QUANTITY = {
    "Samples/s": "samples per second",
    "Queries/s": "samples per second",
    "samples/s": "samples per second",
    "Tokens/s": "tokens per second",
    "tokens/s": "tokens per second",
    "Latency (ms)": "latency",
    "Latency (s)": "latency",
    "ns": "latency",
}
#: every disagreement allowed, with why: the checker's own inconsistency, which workload does not copy
_MISLABEL = (
    "checker bug: results.py:122 prints SPECIAL_UNIT_DICT's Tokens/s for {bench} {scenario}, but "
    "performance_check.py:559-572 took the figure from {key} (RESULT_FIELD_ENDPOINTS; the "
    "RESULT_FIELD_BENCHMARK_OVERWRITE entry is keyed 'Offline'/'Server' and the scenario is config.yaml's "
    "lower-case 'offline' or 'Interactive'): the value is samples per second; workload reports it as such"
)
#: (system or "*" for every system, benchmark, scenario, field) -> why
EXPLAINED: dict[tuple[str, str, str, str], str] = {
    ("*", DSR1, "Offline", "unit"): _MISLABEL.format(bench=DSR1, scenario="Offline", key="result_samples_per_second"),
    ("*", DSR1, "Interactive", "unit"): _MISLABEL.format(
        bench=DSR1, scenario="Interactive", key="result_completed_samples_per_sec"
    ),
    ("*", GPT_OSS, "Offline", "unit"): _MISLABEL.format(
        bench=GPT_OSS, scenario="Offline", key="result_samples_per_second"
    ),
    ("*", LLAMA_EDGE, "Offline", "unit"): _MISLABEL.format(
        bench=LLAMA_EDGE, scenario="Offline", key="result_samples_per_second"
    ),
    ("Variant-failed-samples", DSR1, "Server", "validity"): (
        "checker bug: loadgen_errors_check (performance_check.py:146-147) sets has_critical_errors only under "
        "--submission-exceptions, so 12 failed samples (n_samples_failed -> num_errors) pass; workload: INVALID"
    ),
}


#: REQUIRED_ACC_BENCHMARK["wan-2.2-t2v-a14b"]["v6.1"]: the sample videos a wan-2.2 accuracy folder must hold
WAN_VIDEOS = ("130", "106", "84", "59", "12", "123", "43", "22", "238", "32")


def copy_scenario(source: Path, tree: Path, system: str, bench: str, scenario: str) -> Path:
    """A scenario folder of the tree: the fixture's files plus what the checker's structure checks ask for
    (measurements.json and README.md, measurements_checks.py; wan-2.2's accuracy/videos, accuracy_check.py
    extra_files_check) as empty stand-ins: they are not results."""
    target = tree / "results" / system / bench / scenario
    shutil.copytree(source, target)
    shutil.copy(MEASUREMENTS, target / "measurements.json")
    (target / "README.md").write_text("Made for the checker's structure check (measurements_checks.py).\n")
    if bench == WAN:
        videos = target / "accuracy" / "videos"
        videos.mkdir(parents=True)
        for name in (*WAN_VIDEOS, "captions"):
            (videos / f"{name}.mp4" if name != "captions" else videos / "captions.txt").write_bytes(b"")
    return target


def add_system(tree: Path, system: str, system_type: str) -> None:
    described = json.loads((REAL_SERVER / "systems" / f"{NV_SYSTEM}.json").read_text(encoding="utf-8"))
    described.update({"system_name": system, "system_type": system_type, "submitter": tree.name})
    (tree / "systems").mkdir(parents=True, exist_ok=True)
    (tree / "systems" / f"{system}.json").write_text(json.dumps(described, indent=4))


def edit(path: Path, dotted: str, value: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    *parents, last = dotted.split("/")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    path.write_text(json.dumps(data, indent=2))


def build_tree(root: Path) -> Path:
    """The minimal complete v6.1 tree of the fixtures plus one-change variants; returns the tree root."""
    nvidia = root / "closed" / "NVIDIA"
    (nvidia / "src").mkdir(parents=True)
    add_system(nvidia, NV_SYSTEM, "datacenter")
    for scenario in ("Offline", "Interactive"):
        copy_scenario(REAL / "results" / NV_SYSTEM / DSR1 / scenario, nvidia, NV_SYSTEM, DSR1, scenario)
    server = REAL_SERVER / "results" / NV_SYSTEM / DSR1 / "Server"
    copy_scenario(server, nvidia, NV_SYSTEM, DSR1, "Server")
    for scenario in ("Offline", "Server", "Interactive"):
        copy_scenario(REAL / "results" / NV_SYSTEM / QWEN / scenario, nvidia, NV_SYSTEM, QWEN, scenario)
    example = root / "closed" / "Example"
    (example / "src").mkdir(parents=True)
    for system, kind in (("Example-DC_H200x8", "datacenter"), ("Example-Edge_RTX6000x1", "edge")):
        add_system(example, system, kind)
        for bench_dir in (MADE / "results" / system).iterdir():
            for scenario_dir in bench_dir.iterdir():
                copy_scenario(scenario_dir, example, system, bench_dir.name, scenario_dir.name)

    def variant(name: str, bench: str, scenarios: dict[str, Path]) -> Path:
        """A system of its own holding ``scenarios`` of ``bench``; the first one's folder, to change."""
        add_system(nvidia, name, "datacenter")
        return {s: copy_scenario(src, nvidia, name, bench, s) for s, src in scenarios.items()}[next(iter(scenarios))]

    qwen = {s: REAL / "results" / NV_SYSTEM / QWEN / s for s in ("Interactive", "Offline", "Server")}
    low = variant("Variant-low-accuracy", QWEN, qwen)  # below the Interactive (8k subset) target 0.779922
    edit(low / "accuracy" / "accuracy_results.json", "accuracy_scores/0/score", 0.7795)
    slow = variant("Variant-slow-e2e", QWEN, qwen)  # e2e p99 over Interactive's 1.5 s
    edit(slow / "performance" / "result_summary.json", "latency/early_stopping_percentiles/99.0", 1.61e9)
    dsr1 = {"Server": server, "Offline": REAL / "results" / NV_SYSTEM / DSR1 / "Offline"}
    failed = variant("Variant-failed-samples", DSR1, dsr1)
    edit(failed / "performance" / "result_summary.json", "n_samples_failed", 12)
    seeds = variant("Variant-wrong-seed", DSR1, dsr1)
    text = (seeds / "config.yaml").read_text(encoding="utf-8")
    (seeds / "config.yaml").write_text(
        text.replace("dataloader_random_seed: 2747215439041700203", "dataloader_random_seed: 42")
    )
    tpot = variant("Variant-slow-tpot", DSR1, dsr1)
    edit(tpot / "performance" / "result_summary.json", "tpot/early_stopping_percentiles/99.0", 81e6)
    made = MADE / "results" / "Example-DC_H200x8"
    long = variant("Variant-long-outputs", GPT_OSS, {s: made / GPT_OSS / s for s in ("Server", "Offline")})
    edit(long / "performance" / "result_summary.json", "output_sequence_lengths/avg", 1450.0)  # TEST09: > 1406.02
    no_audit = variant("Variant-no-audit", WAN, {s: made / WAN / s for s in ("SingleStream", "Offline")})
    shutil.rmtree(no_audit / "audit")  # TEST04's audit file, required of wan-2.2
    return root


@dataclass(frozen=True)
class CheckerRow:
    valid: bool
    value: float | None
    unit: str | None
    accuracy: str | None


def run_checker(tree: Path, work: Path) -> dict[tuple[str, str, str], CheckerRow]:
    """The checker's verdict per (system, benchmark, scenario)."""
    try:
        import yaml  # noqa: F401  (the checker's only import beyond the standard library)
    except ImportError:
        unavailable("pyyaml (the checker's dependency, in the test extra) is not installed")
    tools = upstream_root() / CHECKER_TOOLS
    summary = work / "summary.csv"
    command = [sys.executable, "-m", "submission_checker.main", "--input", str(tree), "--version", "v6.1"]
    done = subprocess.run(
        [*command, "--csv", str(summary)],
        cwd=tools,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # nothing written into the upstream copy
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = done.stdout + done.stderr
    rows: dict[tuple[str, str, str], CheckerRow] = {}
    for match in re.finditer(
        r"(NoResults|Results) (\S+)/results/([^/]+)/([^/]+)/([^/]+)/performance\S*(?: (\S+))?", log
    ):
        kind, _, system, bench, scenario, value = match.groups()
        rows[(system, bench, scenario)] = CheckerRow(kind == "Results", float(value) if value else None, None, None)
    assert rows, log[-3000:]
    with summary.open(encoding="utf-8") as handle:
        for line in csv.DictReader(handle):
            key = (line["Platform"], line["Model"], line["Scenario"])
            rows[key] = CheckerRow(True, float(line["Result"]), line["Units"], line["Accuracy"])
    return rows


def ours(result: BenchmarkResult, checker_unit: str | None) -> tuple[float | None, str | None, str]:
    """workload's headline in the checker's scale (latency in ms, or s for a Latency (s) unit), its unit, and the
    unit it is shown in once scaled."""
    if result.headline is None:
        return None, None, ""
    value, unit = result.headline.value, result.headline.unit
    if unit == "ns":
        value /= _NS_PER.get(checker_unit or "", 1e6)
        return value, unit, "s" if checker_unit == "Latency (s)" else "ms"
    return value, unit, unit


def explanation(key: tuple[str, str, str, str]) -> str | None:
    return EXPLAINED.get(key) or EXPLAINED.get(("*", *key[1:]))


def test_the_checker_and_workload_agree_on_every_result(tmp_path: Path) -> None:
    tree = build_tree(tmp_path / "submission")
    checker = run_checker(tree, tmp_path)
    collection = collect(tree)
    assert not collection.issues, collection.issues
    mine = {
        (r.system or "", r.benchmark_full or "", r.scenario or ""): r
        for r in collection.results
        if r.test_mode != "audit"
    }
    # the checker folds a result's compliance audits into its verdict; workload gives them rows of their own
    audits_pass = {}
    for r in collection.results:
        if r.test_mode == "audit":
            key = (r.system or "", r.benchmark_full or "", r.scenario or "")
            audits_pass[key] = audits_pass.get(key, True) and r.validity == "VALID"
    assert sorted(mine) == sorted(checker)
    lines = ["| system | benchmark | scenario | checker | workload | agree |", "|---|---|---|---|---|---|"]
    disagreements: dict[tuple[str, str, str, str], str] = {}
    agreements = 0
    for key in sorted(checker):
        theirs, result = checker[key], mine[key]
        unit = result.metrics[0].metadata.get("mlperf_checker_unit") if result.metrics else None
        value, my_unit, shown = ours(result, theirs.unit or (unit if isinstance(unit, str) else None))
        fields = {
            "validity": (
                theirs.valid,
                result.validity == "VALID" and result.accuracy_pass is not False and audits_pass.get(key, True),
            ),
            "accuracy": (theirs.valid or None, result.accuracy_pass if theirs.valid else None),
        }
        if theirs.valid:
            fields["value"] = (theirs.value, value)
            fields["unit"] = (_QUANTITY.get(theirs.unit or ""), _QUANTITY.get(my_unit or ""))
        differ = []
        for name, (a, b) in fields.items():
            same = a == pytest.approx(b, rel=1e-9) if name == "value" and a is not None and b is not None else a == b
            if same:
                agreements += 1
            else:
                differ.append(name)
                disagreements[(*key, name)] = f"checker {a!r}, workload {b!r}"
        said = f"{'VALID' if theirs.valid else 'rejected'}" + (
            f", {theirs.value:.6g} {theirs.unit}, accuracy {theirs.accuracy}" if theirs.valid else ""
        )
        mine_said = (
            f"{result.validity}, {value:.6g} {shown}, accuracy " if value is not None else f"{result.validity}, "
        )
        mine_said += {True: "PASS", False: "FAIL", None: "-"}[result.accuracy_pass]
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {said} | {mine_said} | {'yes' if not differ else ', '.join(differ)} |"
        )
    print("\n".join(lines))
    print(f"{len(checker)} results, {agreements} field agreements, {len(disagreements)} disagreements (explained)")
    for key, why in sorted(disagreements.items()):
        print(f"- {' '.join(key)}: {why}; {explanation(key) or 'UNEXPLAINED'}")
    unexplained = {k: v for k, v in disagreements.items() if explanation(k) is None}
    assert not unexplained, unexplained
    stale = [k for k in EXPLAINED if not any(k == d or (k[0] == "*" and k[1:] == d[1:]) for d in disagreements)]
    assert not stale, stale  # an explained disagreement that is gone


def test_the_variants_are_rejected_by_the_checker_for_the_changed_rule(tmp_path: Path) -> None:
    """The variants test what they claim: the checker rejects each (but the failed-samples one, see EXPLAINED)."""
    tree = build_tree(tmp_path / "submission")
    checker = run_checker(tree, tmp_path)
    rejected = {key for key, row in checker.items() if not row.valid}
    assert rejected == {
        ("Variant-low-accuracy", QWEN, "Interactive"),
        ("Variant-slow-e2e", QWEN, "Interactive"),
        ("Variant-wrong-seed", DSR1, "Server"),
        ("Variant-slow-tpot", DSR1, "Server"),
        ("Variant-long-outputs", GPT_OSS, "Server"),
        ("Variant-no-audit", WAN, "SingleStream"),
    }
    results = {(r.system, r.benchmark_full, r.scenario): r for r in collect(tree).results}
    reasons = {key: " / ".join(results[key].invalid_reasons) for key in rejected}
    assert "accuracy is below its target" in reasons[("Variant-low-accuracy", QWEN, "Interactive")]
    assert "p99 latency 1610.00 ms is not below the limit 1500 ms" in reasons[("Variant-slow-e2e", QWEN, "Interactive")]
    assert "dataloader_random_seed is '42'" in reasons[("Variant-wrong-seed", DSR1, "Server")]
    assert "p99 tpot 81.00 ms is not below the limit 80 ms" in reasons[("Variant-slow-tpot", DSR1, "Server")]
    assert (
        "TEST09: the mean output length 1450.0 tokens is not within [1150.38, 1406.02]"
        in reasons[("Variant-long-outputs", GPT_OSS, "Server")]
    )
    assert (
        "compliance: audit/audit_output_caching_test.json (TEST04) is missing"
        in reasons[("Variant-no-audit", WAN, "SingleStream")]
    )
