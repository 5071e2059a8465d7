"""The harness image's recipe: what makes ``BuildImage`` build again, and what does not.

The recipe hash (label ``workload.recipe``, :mod:`workload.mlperf.image`) covers the build context as
``docker build`` uses it: names, types, permission bits, link targets and contents. A checkout cloned
again (the same files with new modification times and another tar order) is the same recipe: the
image, which takes NVIDIA's recipe about an hour, is not built again. Any change to what ``COPY``
would put in the image is a new recipe.

The end-to-end test builds for real on the test bed's dockerd under a tag of its own (other tests
share ``mlperf-inference:<user>-<machine>`` and may rebuild it at any time).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.steptypes import EchoParameters, EchoStep, step_context
from workload.hosts.local import LocalHost
from workload.mlperf.image import build, context_digest
from workload.mlperf.ops import BuildImage
from workload.mlperf.settings import UserFacts

FIXTURE_DOCKER = Path(__file__).parent / "fixtures" / "harness" / "tree" / "closed" / "NVIDIA" / "docker"


def tarball(
    files: dict[str, bytes],
    *,
    mtime: int = 0,
    prefix: str = "./",
    owner: int = 0,
    reverse: bool = False,
    executable: frozenset[str] = frozenset(),
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(files, reverse=reverse):
            info = tarfile.TarInfo(prefix + name)
            if name.endswith("@link"):
                info.type, info.linkname = tarfile.SYMTYPE, files[name].decode()
            else:
                info.size = len(files[name])
            info.mode = 0o755 if name in executable else 0o644
            info.mtime, info.uid, info.gid = mtime, owner, owner
            tar.addfile(info, None if info.issym() else io.BytesIO(files[name]))
    return buffer.getvalue()


FILES = {"Dockerfile": b"FROM debian\nCOPY a /a\n", "a/b.txt": b"one", "a/c@link": b"b.txt"}


def test_times_owners_order_and_the_dot_prefix_are_not_the_recipe() -> None:
    first = context_digest(tarball(FILES))
    assert context_digest(tarball(FILES, mtime=1_790_000_000, owner=1000, prefix="", reverse=True)) == first


@pytest.mark.parametrize(
    "changed",
    [
        {**FILES, "a/b.txt": b"two"},  # content
        {**FILES, "a/c@link": b"other.txt"},  # link target
        {**{k: v for k, v in FILES.items() if k != "a/b.txt"}, "a/B.txt": b"one"},  # a name
        {**FILES, "a/d.txt": b""},  # one empty file more
    ],
)
def test_what_copy_would_put_in_the_image_is_the_recipe(changed: dict[str, bytes]) -> None:
    assert context_digest(tarball(changed)) != context_digest(tarball(FILES))


def test_permission_bits_are_the_recipe() -> None:
    assert context_digest(tarball(FILES, executable=frozenset({"a/b.txt"}))) != context_digest(tarball(FILES))


@pytest.fixture
def own_tag(docker_engine: Any) -> Iterator[tuple[str, list[str]]]:
    """A tag of this test's own, and a list the test adds its image ids to: all are removed afterwards."""
    tag = f"workload-test/recipe-{uuid.uuid4().hex[:12]}:x"
    built: list[str] = []
    yield tag, built
    for name in (tag, f"{tag}-latest", *built):
        with contextlib.suppress(Exception):  # absent already
            docker_engine.client.images.remove(name, force=True)


@pytest.mark.slow
def test_a_checkout_cloned_again_does_not_build_again_and_a_changed_recipe_does(
    tmp_path: Path, docker_engine: Any, freshvm_image: str, own_tag: tuple[str, list[str]]
) -> None:
    tag, built_ids = own_tag
    nvidia = tmp_path / "closed" / "NVIDIA"
    shutil.copytree(FIXTURE_DOCKER, nvidia / "docker")
    host = LocalHost("local")
    ctx = step_context(host, tmp_path)
    step = EchoStep(EchoParameters(), location="Actions[0]", kind="action")
    op = BuildImage(tag=tag, nvidia_dir=str(nvidia), base_image=freshvm_image, build=True)
    user = UserFacts(name="root", uid=0, gid=0, group="root", home="/root")
    client = docker_engine.client

    def built() -> str:
        assert build(step, ctx, client, op, user) == tag
        built_ids.extend(str(client.images.get(name).id) for name in (tag, f"{tag}-latest"))
        return built_ids[-2]

    first = built()
    assert "building " in ctx.log_path.read_text()

    # Cloned again: the same files, new modification times (a day later).
    for path in (nvidia / "docker").rglob("*"):
        stamp = path.stat().st_mtime + 86_400
        os.utime(path, (stamp, stamp))
    log_before = ctx.log_path.read_text()
    assert built() == first
    assert "building " not in ctx.log_path.read_text()[len(log_before) :]

    # A changed recipe builds again.
    dockerfile = nvidia / "docker" / "release" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "ENV WORKLOAD_RECIPE_TEST=1\n")
    assert built() != first
