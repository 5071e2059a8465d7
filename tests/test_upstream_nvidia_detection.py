"""System identification per round as NVIDIA's REAL v5.1/v6.0 trees do it (issue 27 item 1).

v5.1 and v6.0 ship no ``scripts/get_system_id.py``, and their ``code/common/paths.py`` will not import without the
folders NVIDIA's README has the user make (v5.1 ``build/``, v6.0 the ``3rdparty/`` clones). On a staged copy of each
real tree this test shows: NVIDIA's code refuses to import in the bare tree; the ``PrepareTree`` ops our plan runs
before the system check make the folders (v5.1: NVIDIA's own ``make link_dirs``; v6.0: our resumable clone command, with
``git`` stood in for the network: ``upstream_nvidia.GIT_STANDIN``); and then the system check exactly as planned
(``python3 -c`` of NVIDIA's ``code/common/systems/system_list.py``) runs NVIDIA's detection: nvmitten's probes, with the
CUDA driver stood in to report 8x B200 (``tests/upstream_standins/cuda``), matched against NVIDIA's systems; and the
answer is read by our adapter as the round's unknown-system id, or as the ``SYSTEM_NAME`` override.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import upstream_nvidia as up
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import IdentifySystem, PrepareTree
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds.v5_1 import is_unregistered, system_answer
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem

ROUNDS = {"v5.1": HarnessVersion(5, 1), "v6.0": HarnessVersion(6, 0)}
B200X8 = HostSystem("NVIDIA B200", 183359, 8, "Intel(R) Xeon(R) 8570", 56, 2, 2, 2_000_000_000_000)
#: What the stand-in CUDA driver reports: 8x B200 (179 GiB each, compute capability 10.0).
GPUS = up.cuda_gpus("NVIDIA B200", 192_265_846_784, (10, 0), 8)
TIMEOUT_S = 300


def _plan(round_name: str) -> list[object]:
    params = MLPerfParameters.model_validate(
        {"Model": "llama2-70b", "HarnessRound": round_name, "RequireCustomSystemSupport": True}
    )
    facts = MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=ROUNDS[round_name],
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        machine="x86_64",
        system=B200X8,
    )
    return list(plan_ops(params, facts, run_id="R").ops)


def _run(argv: tuple[str, ...], staged: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` as the container would run it from closed/NVIDIA, ``git`` stood in for the network."""
    system_id = env.pop("SYSTEM_NAME", None)
    return up.run_in_round(staged, argv, system_id=system_id, gpus=GPUS, extra_env=up.offline_path(tmp) | env)


@pytest.mark.parametrize("round_name", sorted(ROUNDS))
def test_the_plan_prepares_the_tree_then_runs_nvidias_own_detection(round_name: str, tmp_path: Path) -> None:
    staged = up.stage_round(round_name, tmp_path, prepared=False)
    ops = _plan(round_name)
    check = next(op for op in ops if isinstance(op, IdentifySystem))
    prepare = [op for op in ops if isinstance(op, PrepareTree)]
    # Every folder is made before the system check, which imports NVIDIA's code.
    assert prepare and all(ops.index(op) < ops.index(check) for op in prepare)
    assert not (staged / "scripts" / "get_system_id.py").exists()  # what the v4.1 check ran is not in this round
    assert "scripts.get_system_id" not in " ".join(check.argv)

    bare = _run(check.argv, staged, tmp_path)
    assert bare.returncode != 0 and "FileNotFoundError: Core file" in bare.stderr, bare.stderr[-1500:]

    for op in prepare:
        made = _run(op.argv, staged, tmp_path)
        assert made.returncode == 0, made.stdout[-1500:] + made.stderr[-1500:]
        assert (staged / op.folder).is_dir()
        if op.argv[0] == "bash" and op.argv[-1]:  # a pinned clone fetched the pinned commit (issue 27 item 4)
            origin = (staged / op.folder / ".git" / "standin-origin").read_text().split()
            assert origin == [op.argv[-2], op.argv[-1]]
        again = _run(op.argv, staged, tmp_path)  # resumable: a second run keeps what is there
        assert again.returncode == 0, again.stderr[-1500:]

    detected = _run(check.argv, staged, tmp_path)
    assert detected.returncode == 0, detected.stderr[-2000:]
    answer = system_answer(detected.stdout)
    # This machine is none of NVIDIA's systems (no nvidia-smi PCI id, not its CPU/memory): NVIDIA's name for it.
    assert answer == "UNREGISTERED_x86_64_NVIDIA_B200x8", detected.stdout + detected.stderr[-1500:]
    assert is_unregistered(answer)
    named = _run(check.argv, staged, tmp_path, SYSTEM_NAME="WL_B200-SXM-180GBx8")
    assert named.returncode == 0 and system_answer(named.stdout) == "WL_B200-SXM-180GBx8", named.stderr[-1500:]


def test_a_clone_cut_off_part_way_is_made_again(tmp_path: Path) -> None:
    staged = up.stage_round("v6.0", tmp_path, prepared=False)
    op = next(op for op in _plan("v6.0") if isinstance(op, PrepareTree))
    partial = staged / f"{op.folder}.partial"
    (partial / "half-written").mkdir(parents=True)  # what an interrupted `git clone` leaves
    made = _run(op.argv, staged, tmp_path)
    assert made.returncode == 0, made.stderr[-1500:]
    assert not partial.exists()
    assert (staged / op.folder / ".git" / "standin-origin").read_text().strip() == op.argv[-2]
    assert not (staged / op.folder / "half-written").exists()
