"""The conformance tests' support module: where the upstream tree is, and what an absent tree does."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

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


def test_every_process_run_with_the_standins_on_its_path_has_the_memo(tmp_path: Path) -> None:
    probe = "import inspect; print(inspect.findsource.__module__)"
    env = {**os.environ, "PYTHONPATH": str(up.STANDINS), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "class_source_memo"
