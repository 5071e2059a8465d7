"""The conformance tests' support module: where the upstream tree is, and what an absent tree does."""

from __future__ import annotations

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
