"""The "fresh VM" image: a real Debian bookworm (debootstrap minbase) plus the stand-in base tools.

Two layers, each cached by a content hash so a change to a stand-in script does not redo the
40-60 s debootstrap:

1. ``local/freshvm-base:<hash>``: ``debootstrap --variant=minbase`` from the Debian mirror in this
   machine's apt sources, with apt pointed at nothing. The root filesystem tarball is cached under
   ``<state>/cache`` and survives a wiped Docker data root.
2. ``local/freshvm:bookworm``: the base plus what a cloud VM has that a container lacks
   (stand-in ``systemctl``/``journalctl``, the boot script, the dpkg-lock holder), with apt
   sources pointing ONLY at the stand-in repository mounted at :data:`REPO_MOUNT`.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import docker

from tests.testbed.dockerd import DockerEngine
from tests.testbed.state import STANDINS_DIR, TestbedError, digest, file_lock, state_dir, tree_digest

IMAGE = "local/freshvm:bookworm"
SUITE = "bookworm"
REPO_MOUNT = "/srv/standin-repo"
VM_CONFIG_MOUNT = "/srv/standin-vm"
RECIPE_LABEL = "workload.testbed.recipe"

# What a minimal cloud image has: sshd, python3 (cloud-init needs it), sudo, and the download and
# key tools installers use (real ones, so the CUDA .run download through wget/curl is real).
INCLUDE = (
    "openssh-server",
    "python3",
    "sudo",
    "curl",
    "wget",
    "ca-certificates",
    "gnupg",
    "lsb-release",
    "procps",
    "psmisc",
    "kmod",
    "make",
    "less",
)
DEBOOTSTRAP_RECIPE = f"debootstrap --variant=minbase --include={','.join(INCLUDE)} {SUITE}"


def debian_mirror() -> str:
    """The Debian mirror URI configured in this machine's apt sources (``$WORKLOAD_TESTBED_MIRROR`` wins)."""
    override = os.environ.get("WORKLOAD_TESTBED_MIRROR")
    if override:
        return override
    sources = [*sorted(Path("/etc/apt/sources.list.d").glob("*")), Path("/etc/apt/sources.list")]
    for path in sources:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for stanza in re.split(r"\n\s*\n", text):  # deb822 .sources files
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split() and "security" not in uris.group(1):
                return uris.group(1)
        for line in text.splitlines():  # one-line format
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m and m.group(2) == SUITE:
                return m.group(1)
    raise TestbedError(
        "test bed: no Debian bookworm mirror in /etc/apt/sources.list.d/ or /etc/apt/sources.list; "
        "set WORKLOAD_TESTBED_MIRROR=http://deb.debian.org/debian"
    )


def _rootfs_tarball() -> Path:
    """Build (once per machine) and return the debootstrap root filesystem tarball."""
    cache = state_dir() / "cache"
    cache.mkdir(exist_ok=True)
    tarball = cache / f"freshvm-{SUITE}-{digest(DEBOOTSTRAP_RECIPE)}.tar"
    if tarball.exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise TestbedError("test bed: debootstrap is not installed; run `apt-get install -y debootstrap`")
    work = cache / f"rootfs-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE, str(work), debian_mirror()]
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        log = work / "debootstrap" / "debootstrap.log"
        detail = log.read_text(errors="replace")[-3000:] if log.exists() else proc.stderr[-3000:]
        shutil.rmtree(work, ignore_errors=True)
        raise TestbedError(f"test bed: debootstrap failed (exit {proc.returncode}):\n{detail}")
    # A fresh cloud VM has no downloaded .debs and no apt lists yet; keep the image small and honest.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (work / sub).glob("*"):
            if item.is_file():
                item.unlink()
    (work / "etc/apt/sources.list").write_text("")
    partial = tarball.with_suffix(f".partial-{os.getpid()}")
    subprocess.run(["tar", "-C", str(work), "--numeric-owner", "-cf", str(partial), "."], check=True)
    partial.rename(tarball)
    shutil.rmtree(work, ignore_errors=True)
    (cache / "debootstrap-seconds.txt").write_text(f"{time.monotonic() - started:.1f}\n")
    return tarball


def _has_image(client: docker.DockerClient, tag: str, recipe: str) -> bool:
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return bool((image.labels or {}).get(RECIPE_LABEL) == recipe)


def _base_image(engine: DockerEngine) -> str:
    recipe = digest(DEBOOTSTRAP_RECIPE)
    tag = f"local/freshvm-base:{SUITE}-{recipe}"
    if _has_image(engine.client, tag, recipe):
        return tag
    tarball = _rootfs_tarball()
    repo, _, version = tag.partition(":")
    # A file name (not a stream) makes the SDK send it with a Content-Length; dockerd 20.10
    # rejects the chunked upload import_image_from_stream produces.
    engine.client.api.import_image(
        src=str(tarball), repository=repo, tag=version, changes=[f"LABEL {RECIPE_LABEL}={recipe}"]
    )
    if not _has_image(engine.client, tag, recipe):
        raise TestbedError(f"test bed: `docker import` of {tarball} did not produce {tag}")
    return tag


DOCKERFILE = """\
FROM {base}
COPY image/ /
RUN set -e; \\
    chmod 0755 /usr/bin/systemctl /usr/bin/journalctl /usr/lib/standin/* /usr/sbin/reboot; \\
    mkdir -p /usr/lib/standin/boot.d /var/lib/standin /etc/systemd/system/multi-user.target.wants; \\
    rm -f /etc/ssh/ssh_host_*; \\
    sed -i 's/^session\\s*required\\s*pam_loginuid.so/session optional pam_loginuid.so/' /etc/pam.d/sshd; \\
    echo 'deb [trusted=yes] file:{repo} ./' > /etc/apt/sources.list.d/standin.list; \\
    : > /etc/apt/sources.list; \\
    printf 'APT::Install-Recommends "false";\\n' > /etc/apt/apt.conf.d/90standin-norecommends
LABEL {label}={recipe}
ENTRYPOINT ["/usr/lib/standin/boot"]
"""


def ensure_image(engine: DockerEngine) -> str:
    """Return the fresh-VM image tag, building whatever is missing (idempotent, concurrency-safe)."""
    with file_lock("image"):
        base = _base_image(engine)
        recipe = digest(base, DOCKERFILE, tree_digest(STANDINS_DIR / "image"))
        if _has_image(engine.client, IMAGE, recipe):
            return IMAGE
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            text = DOCKERFILE.format(base=base, repo=REPO_MOUNT, label=RECIPE_LABEL, recipe=recipe).encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
            tar.add(STANDINS_DIR / "image", arcname="image")
        context.seek(0)
        try:
            engine.client.images.build(fileobj=context, custom_context=True, tag=IMAGE, rm=True, forcerm=True)
        except docker.errors.BuildError as exc:
            log = "".join(str(chunk.get("stream", chunk)) for chunk in exc.build_log)
            raise TestbedError(f"test bed: building {IMAGE} failed: {exc}\n{log[-3000:]}") from None
        return IMAGE


def ensure_derived_image(engine: DockerEngine, tag: str, dockerfile: str) -> str:
    """Build ``tag`` from ``dockerfile`` (a ``FROM`` on an image of this test bed) only when it is missing
    or was built from another recipe; return ``tag``.

    Rebuilding unconditionally gives the tag a new image id each time (the builder does not always hit
    its cache), and the harness code recreates a container whose image id changed under it
    (``HarnessContainer.ensure_running``): a test that rebuilt the tag killed the containers (and the
    LLM servers in them) of every test running at that moment, in other workers and other sessions.
    The recipe (the Dockerfile and the id of its base image) is kept as a label; the build holds a lock.
    """
    base = dockerfile.split("\n", 1)[0].removeprefix("FROM ").strip()
    recipe = digest(dockerfile, engine.client.images.get(base).id)
    with file_lock("derived-image-" + re.sub(r"[^A-Za-z0-9_.-]", "_", tag)):
        if _has_image(engine.client, tag, recipe):
            return tag
        text = f"{dockerfile.rstrip()}\nLABEL {RECIPE_LABEL}={recipe}\n"
        engine.client.images.build(fileobj=io.BytesIO(text.encode()), tag=tag, rm=True)
        if not _has_image(engine.client, tag, recipe):
            raise TestbedError(f"test bed: building {tag} did not give an image labelled with its recipe")
        return tag
