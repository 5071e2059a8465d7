"""The conformance tests' support module: where the upstream tree is, and what an absent tree does."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import upstream_nvidia as up


def test_the_upstream_folder_defaults_beside_the_repository_and_follows_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(up.UPSTREAM_ENV, raising=False)
    assert up.upstream_root() == (up.REPO_ROOT.parent / "shared" / "upstream").resolve()
    monkeypatch.setenv(up.UPSTREAM_ENV, str(tmp_path))
    assert up.upstream_root() == tmp_path.resolve()


def test_an_absent_tree_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(up.UPSTREAM_ENV, str(tmp_path / "nowhere"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="nowhere"):
        up.require_round("v5.1")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have them"):
        up.require_round("v5.1")


def test_a_staged_tree_is_a_private_copy_with_the_readmes_folders(tmp_path: Path) -> None:
    staged = up.stage_round("v6.0", tmp_path)
    assert (staged / "3rdparty" / "trtllm").is_dir() and (staged / "build").is_dir()
    assert (staged / up.CHECKER["v6.0"][0]).is_file()
    assert (staged / "VERSION").read_text().strip() == "v6.0"
    bare = up.stage_round("v6.0", tmp_path / "bare", prepared=False)
    assert not (bare / "3rdparty").exists()


_CLASSES = """
class Base:
    x = 1


class Child(Base):
    class Inner:
        y = 2


def make():
    class Local:
        z = 3

    return Local
"""


def test_the_class_source_memo_answers_what_inspect_answers_and_remembers_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(up.STANDINS))
    memo = importlib.import_module("class_source_memo")
    (tmp_path / "memo_sample.py").write_text(_CLASSES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sample = importlib.import_module("memo_sample")
    try:
        for cls in (sample.Base, sample.Child, sample.Child.Inner, sample.make()):
            real = memo._real_findsource(cls)
            first, again = memo.findsource(cls), memo.findsource(cls)
            assert first == real and again is first, cls
            assert inspect.getsourcelines(cls) == inspect.getsourcelines(cls)  # through the real module too
        assert memo.findsource(sample.make) == memo._real_findsource(sample.make)  # not a class: passed on
        ghost = type("Ghost", (), {"__module__": "memo_sample"})  # no class statement in its file
        for _ in range(2):
            with pytest.raises(OSError, match="could not find class definition"):
                memo.findsource(ghost)
        assert id(ghost) not in memo._ANSWERS
    finally:
        sys.modules.pop("memo_sample", None)


def test_every_process_run_with_the_standins_on_its_path_has_the_memos(tmp_path: Path) -> None:
    probe = "import inspect; print(inspect.findsource.__module__, inspect.getframeinfo.__module__)"
    env = {**os.environ, "PYTHONPATH": str(up.STANDINS), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["class_source_memo", "frame_info_memo"]


def _both(memo: Any, frame: Any, context: int = 1) -> tuple[Any, Any]:
    """The memo's answer and the real one for ``frame``, suspended at the same instruction (its call of this)."""
    return memo.getframeinfo(frame, context), memo._real_getframeinfo(frame, context)


def _frame_here(depth: int, memo: Any, seen: list[tuple[Any, Any]]) -> None:
    """Records both answers for this frame at two instructions and for its caller, then recurses."""
    frame = sys._getframe()
    seen.append(_both(memo, frame))
    seen.append(_both(memo, frame, 3))
    seen.append(_both(memo, frame.f_back))
    if depth:
        _frame_here(depth - 1, memo, seen)


def test_the_frame_info_memo_answers_what_inspect_answers_and_keys_on_the_instruction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(up.STANDINS))
    memo = importlib.import_module("frame_info_memo")
    seen: list[tuple[Any, Any]] = []
    _frame_here(2, memo, seen)  # three frames of the same code at the same instructions: the answers are reused
    first_caller = seen[2][0]
    _frame_here(0, memo, seen)  # called from another line of this test: its frame answers anew
    for mine, real in seen:
        assert mine == real and mine.positions == real.positions
    assert seen[0][0] is seen[3][0] is seen[6][0] and seen[0][0].lineno != seen[1][0].lineno
    assert len(seen[1][0].code_context) == 3 and len(seen[0][0].code_context) == 1
    assert seen[5][0] is seen[8][0]  # the recursion's callers: one line of _frame_here
    assert seen[-1][0].lineno == first_caller.lineno + 2 and seen[-1][0] is not first_caller
    try:
        raise ValueError("a traceback")
    except ValueError as error:
        tb = error.__traceback__
    assert tb is not None and memo.getframeinfo(tb) == memo._real_getframeinfo(tb)  # passed on, not remembered
    assert all(not isinstance(key[0], type(tb)) for key in memo._ANSWERS)


_REGISTRY_CHECK = """
import inspect, json, runpy, sys
import upstream_standins_boot, class_source_memo
remembered = class_source_memo.findsource
rechecked = set()
def findsource(obj):
    again = inspect.isclass(obj) and id(obj) in class_source_memo._ANSWERS and id(obj) not in rechecked
    answer = remembered(obj)
    if again:  # the remembered answer, against the real function asked afresh (once per class)
        rechecked.add(id(obj))
        assert answer == class_source_memo._real_findsource(obj), obj
    return answer
inspect.findsource = findsource
assert runpy.run_path(sys.argv[1])["main"]() == 0
print(json.dumps(len(rechecked)), file=sys.stderr)
"""


def test_nvidias_v41_registry_gets_what_the_real_findsource_answers(tmp_path: Path) -> None:
    # NVIDIA's v4.1 configs/configuration.py asks inspect.getsourcelines about each class of every config's MRO, most
    # classes many times: each class asked about again gets the memo's answer, checked against a fresh real call.
    staged = up.stage_round("v4.1", tmp_path)
    request = json.dumps({"loads": [["gptj", "Offline"]]})
    done = up.run_in_round(staged, ["python3", "-c", _REGISTRY_CHECK, str(up.DRIVER_V41)], stdin=request)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stderr.splitlines()[-1]) >= 20
    assert json.loads(done.stdout.splitlines()[-1])  # NVIDIA's registry registered classes


_STACK_CHECK = """
import inspect, json, sys
import upstream_standins_boot, frame_info_memo
checked = []
real_stack = inspect.stack
def stack(context=1):
    mine = real_stack(context)[1:]
    infos = [(f.frame, frame_info_memo._real_getframeinfo(f.frame, context)) for f in mine]
    real = [inspect.FrameInfo(frame, *info, positions=info.positions) for frame, info in infos]
    assert mine == real and [m.positions for m in mine] == [r.positions for r in real], (mine, real)
    checked.append(len(mine))
    return mine
inspect.stack = stack
from code.main import MainRunner
print(json.dumps([len(checked), sum(checked)]))
"""


def test_nvidias_fields_see_the_stack_inspect_would_show_them(tmp_path: Path) -> None:
    # nvmitten's Field.__post_init__ reads inspect.stack()[2].filename for every field NVIDIA's v5.1 code.main
    # creates: every one of those stacks, frame by frame, must equal the one the real getframeinfo builds.
    staged = up.stage_round("v5.1", tmp_path)
    done = up.run_in_round(staged, ["python3", "-c", _STACK_CHECK])
    assert done.returncode == 0, done.stderr[-4000:]
    calls, frames = json.loads(done.stdout.splitlines()[-1])
    assert calls >= 100 and frames >= 10 * calls, (calls, frames)
