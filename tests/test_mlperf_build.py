"""Building the harness image when its recipe needs BuildKit named contexts (NVIDIA's v4.1 release)."""

from __future__ import annotations

from workload.mlperf.container import cli_build_command, named_contexts

# The shape of NVIDIA's v4.1 docker/release/Dockerfile (written for this test): a named context
# "common" mounted into RUN steps and copied from, next to a real build stage.
RELEASE_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS base
RUN --mount=type=bind,from=common,target=/tmp/common bash /tmp/common/install_deps.sh
FROM base AS final
COPY --from=common requirements.txt /tmp/
COPY --from=base /usr/local /usr/local
COPY --from=nvcr.io/nvidia/cuda:12.4.0-devel-ubuntu22.04 /usr/local/cuda /usr/local/cuda
COPY --from=0 /etc/os-release /tmp/
"""


def test_named_contexts_are_found_and_stages_images_and_indexes_are_not() -> None:
    assert named_contexts(RELEASE_DOCKERFILE) == ["common"]
    assert named_contexts("FROM debian AS builder\nCOPY --from=builder /a /b\n") == []


def test_cli_build_passes_named_contexts_with_buildkit() -> None:
    command = cli_build_command(
        context_dir="/opt/p/closed/NVIDIA/docker/release",
        dockerfile="/opt/p/closed/NVIDIA/docker/release/Dockerfile",
        tag="mlperf-inference:azureuser-x86_64-latest",
        contexts={"common": "/opt/p/closed/NVIDIA/docker/common"},
        buildargs={"BASE_IMAGE": "nvcr.io/x:y"},
        labels={"workload.recipe": "abc"},
    )
    argv = list(command.argv)
    assert argv[:2] == ["docker", "build"]
    assert argv[argv.index("--build-context") + 1] == "common=/opt/p/closed/NVIDIA/docker/common"
    assert argv[argv.index("--build-arg") + 1] == "BASE_IMAGE=nvcr.io/x:y"
    assert argv[argv.index("--label") + 1] == "workload.recipe=abc"
    assert argv[-1] == "/opt/p/closed/NVIDIA/docker/release"
    assert dict(command.env) == {"DOCKER_BUILDKIT": "1"}
    assert command.sudo
