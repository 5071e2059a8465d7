"""The harness image: run a given one (pulled when missing) or build the checkout's recipe once per recipe.

Called by the interpreter (:mod:`workload.mlperf.interpreter`) for :class:`~workload.mlperf.ops.UseImage`
and :class:`~workload.mlperf.ops.BuildImage`; returns the image tag the container runs. The recipe
hash (label ``workload.recipe``) covers the build context, every named build context, the user
Dockerfile, BASE_IMAGE and the uid:gid, so a changed recipe builds again and an unchanged one never.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import Any

from workload.commands import cmd
from workload.mlperf.container import build_image, cli_build_command, image_label, named_contexts, tar_context
from workload.mlperf.ops import BuildImage, UseImage
from workload.mlperf.settings import UserFacts
from workload.steps import Step, StepContext


def use_image(ctx: StepContext, client: Any, op: UseImage) -> str:
    """The given image, pulled first when the daemon does not have it."""
    if image_label(client, op.image, "x") is None:
        ctx.log(f"pulling {op.image}")
        client.images.pull(op.image)
    return op.image


def build(step: Step, ctx: StepContext, client: Any, op: BuildImage, user: UserFacts) -> str:
    """``op.tag`` built from the checkout's recipe (skipped when its recipe label matches)."""
    host = ctx.host
    release = posixpath.join(op.nvidia_dir, op.release_dir)
    user_file = posixpath.join(op.nvidia_dir, op.user_dockerfile)
    if not host.exists(posixpath.join(release, "Dockerfile")):
        raise step.fail(
            f"{release}/Dockerfile is missing: this is not NVIDIA's harness layout",
            ctx,
            hint="set ContainerImage to run a ready image instead",
        )
    tag = op.tag
    # Named build contexts (``COPY --from=common``) come from docker/<name> beside docker/release,
    # as NVIDIA's Makefile passes them (``--build-context common=docker/common``).
    contexts: dict[str, str] = {}
    for name in named_contexts(host.read_text(posixpath.join(release, "Dockerfile"))):
        path = posixpath.join(posixpath.dirname(release), name)
        if not host.exists(path):
            raise step.fail(
                f"{release}/Dockerfile needs the build context {name!r}, but {path} is missing",
                ctx,
                hint="set ContainerImage to run a ready image instead",
            )
        contexts[name] = path
    context = _tar(ctx, release)
    context_hash = hashlib.sha256(context)
    for name, path in sorted(contexts.items()):
        context_hash.update(name.encode() + _tar(ctx, path))
    user_recipe = host.read_text(user_file) if host.exists(user_file) else ""
    context_hash.update(user_recipe.encode() + (op.base_image or "").encode() + f"{user.uid}:{user.gid}".encode())
    recipe = context_hash.hexdigest()[:16]
    if not op.build or image_label(client, tag, "workload.recipe") == recipe:
        if image_label(client, tag, "workload.recipe") is None:
            raise step.fail(f"image {tag} is not there and BuildImage is false", ctx)
        return tag
    args = {"BASE_IMAGE": op.base_image} if op.base_image else {}
    latest = f"{tag}-latest"
    ctx.log(f"building {latest} from {release}/Dockerfile")
    if contexts:
        ctx.check(
            cli_build_command(
                context_dir=release,
                dockerfile=posixpath.join(release, "Dockerfile"),
                tag=latest if user_recipe else tag,
                contexts=contexts,
                buildargs=args,
                labels={"workload.recipe": recipe},
            ),
            hint="named build contexts need BuildKit: Docker Engine 23+ or the buildx plugin",
        )
    else:
        build_image(
            client,
            context=context,
            dockerfile="Dockerfile",
            tag=latest if user_recipe else tag,
            buildargs=args,
            labels={"workload.recipe": recipe},
            on_line=ctx.line_sink(echo=False),
        )
    if user_recipe:
        ctx.log(f"building {tag} (adds user {user.name}) from {op.user_dockerfile}")
        build_image(
            client,
            context=tar_context({"Dockerfile": user_recipe.encode()}),
            dockerfile="Dockerfile",
            tag=tag,
            buildargs={
                "BASE_IMAGE": latest,
                "UID": str(user.uid),
                "GID": str(user.gid),
                "USER": user.name,
                "GROUP": user.group,
            },
            labels={"workload.recipe": recipe},
            on_line=ctx.line_sink(echo=False),
        )
    return tag


def _tar(ctx: StepContext, folder: str) -> bytes:
    """The folder on the host as a tarball (a build context, and what its recipe hash covers)."""
    host = ctx.host
    tmp = host.run(cmd("mktemp", timeout=30)).stdout.strip()
    try:
        ctx.check(cmd("tar", "-C", folder, "-cf", tmp, "."))
        return host.read_bytes(tmp)
    finally:
        host.run(cmd("rm", "-f", tmp, timeout=30))
