"""The harness image: run a given one (pulled when missing) or build the checkout's recipe once per recipe.

Called by the interpreter (:mod:`workload.mlperf.interpreter`) for :class:`~workload.mlperf.ops.UseImage`
and :class:`~workload.mlperf.ops.BuildImage`; returns the image tag the container runs. The recipe
hash (label ``workload.recipe``) covers the build context, every named build context, the user
Dockerfile, BASE_IMAGE and the uid:gid, so a changed recipe builds again and an unchanged one never.
A context is hashed by what ``docker build`` makes of it (:func:`context_digest`: names, types, modes,
link targets, contents), not by its tarball's bytes: a checkout cloned again holds the same recipe with
new modification times, and Docker's own build cache does not rebuild for those either.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
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
    try:
        context_hash = hashlib.sha256(context_digest(context))
        for name, path in sorted(contexts.items()):
            context_hash.update(name.encode() + context_digest(_tar(ctx, path)))
    except tarfile.TarError as exc:  # our own tar's output: unreadable only when the host's tar misbehaves
        raise step.fail(f"the build context of {release} is not a readable tarball ({exc})", ctx) from None
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


def context_digest(context: bytes) -> bytes:
    """SHA-256 of a build context tarball as ``docker build`` sees it, whatever the order of its members.

    Covered per member: its name (normalized: ``./a`` is ``a``), type, permission bits, link target, device
    numbers and content.
    Left out: modification times, owners and tar's own layout. ``COPY`` gives files root's ownership
    (without ``--chown``), and Docker's build cache compares contents, not times; a checkout cloned
    again must not rebuild an image that takes an hour.
    """
    entries: list[bytes] = []
    with tarfile.open(fileobj=io.BytesIO(context), mode="r:") as tar:
        for member in tar:
            content = hashlib.sha256()
            stream = tar.extractfile(member) if member.isfile() else None
            while stream is not None and (chunk := stream.read(1 << 20)):
                content.update(chunk)
            fields = (posixpath.normpath(member.name).encode(), member.type, b"%o" % (member.mode & 0o7777))
            device = b"%d,%d" % (member.devmajor, member.devminor) if member.isdev() else b""
            entries.append(b"\0".join((*fields, member.linkname.encode(), device, content.digest())))
    digest = hashlib.sha256()
    for entry in sorted(entries):
        digest.update(hashlib.sha256(entry).digest())
    return digest.digest()


def _tar(ctx: StepContext, folder: str) -> bytes:
    """The folder on the host as a tarball (a build context, and what its recipe hash covers)."""
    host = ctx.host
    tmp = host.run(cmd("mktemp", timeout=30)).stdout.strip()
    try:
        ctx.check(cmd("tar", "-C", folder, "-cf", tmp, ".", timeout=1800))
        return host.read_bytes(tmp)
    finally:
        host.run(cmd("rm", "-f", tmp, timeout=30))
