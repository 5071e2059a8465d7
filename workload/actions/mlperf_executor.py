"""``MLPerfExecutor``: NVIDIA's MLPerf Inference harness, run in its container on the host.

Compatible with VirtualClient's MLPerfExecutor parameters (``Model``, ``Username``, ``DiskFilter``,
``RequireCustomSystemSupport``, ``Scenario``) and fixing what the reference notes list as its gaps:
per-model setup stages remembered in host state, one ``make build`` per harness commit, a container
that is checked before every exec and recreated when gone, the real short-run flag, results looked
up in this run's own LOG_DIR, and custom systems registered through the harness's extension points.

``plan`` only reads (files, ``git rev-parse``, ``docker inspect``); :func:`plan_mlperf` is the pure
planner. ``apply`` drives the container through the docker SDK.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import field_validator

from workload.commands import Command, cmd
from workload.errors import StepError, WorkloadError
from workload.hosts.base import Host
from workload.mlperf import custom_system, results
from workload.mlperf.catalog import (
    TEST_MODES,
    canonical_scenario,
    check_config_version,
    model_info,
)
from workload.mlperf.container import ContainerSpec, HarnessContainer, container_name
from workload.mlperf.harness import (
    CONTAINER_WORKDIR,
    SETUP_STAGES,
    HarnessVersion,
    LoadGenOverride,
    log_dir,
    make_argv,
    parse_override,
    parse_override_list,
    render_user_conf,
    run_args,
)
from workload.mlperf.system import HostSystem, parse_system_description
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan, split_list

STATE_KEY = "mlperf"
ASSUMED_VERSION = HarnessVersion(4, 1)


class MLPerfParameters(StepParameters):
    """Parameters (VirtualClient's names first, then this runner's additions)."""

    Model: str
    Username: str | None = None
    #: Accepted for VirtualClient profiles; the scratch disk is chosen by MountDisks (MLPERF_SCRATCH_PATH).
    DiskFilter: str | None = None
    RequireCustomSystemSupport: bool = False
    #: LoadGen scenarios (default: every scenario the harness has configs for, per model).
    Scenarios: str | None = None
    #: ``--config_ver`` values, comma separated (default, high_accuracy, triton, maxq, ...).
    ConfigVersion: str = "default"
    TestModes: str = "PerformanceOnly,AccuracyOnly"
    #: The harness's real short run: ``--test_run`` (v4.1+) or ``--fast`` (v4.0 and older).
    Quick: bool = False
    PackageName: str = "mlperf"
    #: The results repository clone (or its closed/NVIDIA folder); default: what GitRepoClone exported.
    RepoPath: str | None = None
    ScratchPath: str | None = None
    #: ``bert.Server.target_qps=100;bert.Offline.min_duration=60000`` (also as parameters named like the key).
    LoadGenOverrides: str | None = None
    #: Run this image as it is instead of building the repository's recipe.
    ContainerImage: str | None = None
    BuildImage: bool = True
    #: BASE_IMAGE build argument of docker/release/Dockerfile (default: the Dockerfile's own).
    BaseImage: str | None = None
    UseGpus: bool = True
    #: ``--ulimit memlock=-1`` like launch_docker (tests turn it off: their nested dockerd may not raise it).
    UnlimitedMemlock: bool = True
    #: Docker daemon URL (default: the local socket; ``ssh://user@host`` for an SSH host).
    DockerBaseUrl: str | None = None
    #: Test-only: a JSON HostSystem instead of reading nvidia-smi/lscpu (for machines without a GPU).
    SystemDescription: str | None = None

    @field_validator("Model")
    @classmethod
    def _model(cls, value: str) -> str:
        return model_info(value).name


@dataclass(frozen=True)
class Settings:
    """Validated, normalised parameters."""

    model: str
    scenarios: tuple[str, ...]
    config_versions: tuple[str, ...]
    test_modes: tuple[str, ...]
    overrides: tuple[LoadGenOverride, ...]


def settings_of(params: MLPerfParameters) -> Settings:
    """Normalise parameters; ValueError ``"Param: problem"`` for anything wrong (used at profile load)."""
    info = model_info(params.Model)
    scenarios: list[str] = []
    for item in split_list(params.Scenarios) or list(info.scenarios):
        try:
            scenario = canonical_scenario(item)
        except ValueError as exc:
            raise ValueError(f"Scenarios: {exc}") from None
        if scenario not in info.scenarios:
            raise ValueError(
                f"Scenarios: the harness has no {scenario} config for {info.name} (has: {', '.join(info.scenarios)})"
            )
        if scenario not in scenarios:
            scenarios.append(scenario)
    try:
        versions = tuple(check_config_version(v) for v in split_list(params.ConfigVersion) or ["default"])
    except ValueError as exc:
        raise ValueError(f"ConfigVersion: {exc}") from None
    modes = []
    for mode in split_list(params.TestModes):
        canonical = {m.lower(): m for m in TEST_MODES}.get(mode.lower())
        if canonical is None:
            raise ValueError(f"TestModes: unknown test mode {mode!r} (known: {', '.join(TEST_MODES)})")
        modes.append(canonical)
    if not modes:
        raise ValueError("TestModes: give at least one test mode")
    overrides = list(parse_override_list(params.LoadGenOverrides or ""))
    for key, value in (params.model_extra or {}).items():
        if key.count(".") == 2:
            overrides.append(parse_override(key, value))
    return Settings(info.name, tuple(scenarios), versions, tuple(modes), tuple(overrides))


# -- facts ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UserFacts:
    name: str
    uid: int
    gid: int
    group: str
    home: str


@dataclass
class MLPerfFacts:
    """What the planner needs to know about the host (all read-only)."""

    nvidia_dir: str | None
    nvidia_dir_exists: bool
    version: HarnessVersion | None
    commit: str | None
    scratch_path: str | None
    user: UserFacts | None
    machine: str
    done: dict[str, Any] = field(default_factory=dict)
    build_exists: bool = False
    container_status: str | None = None
    docker_problem: str | None = None
    notes: list[str] = field(default_factory=list)


def setup_key(scratch: str, model: str, stage: str) -> str:
    """Host-state key of a finished setup stage: the data lives in the scratch path, per model."""
    return f"setup:{scratch}:{model}:{stage}"


def build_key(nvidia_dir: str, commit: str | None) -> str:
    """Host-state key of a finished ``make build``: once per harness commit."""
    return f"build:{nvidia_dir}@{commit or 'unknown'}"


def plan_mlperf(params: MLPerfParameters, facts: MLPerfFacts, *, run_id: str = "<run id>") -> StepPlan:
    """The pure planner: (parameters, facts) -> the changes a run makes, in order."""
    settings = settings_of(params)
    version = facts.version or ASSUMED_VERSION
    notes = list(facts.notes)
    if facts.version is None:
        notes.append(f"harness version not readable yet (closed/NVIDIA/VERSION); assuming {ASSUMED_VERSION}")
    user = facts.user.name if facts.user else "<user>"
    name = container_name(user, facts.machine)
    scratch = facts.scratch_path or "<MLPERF_SCRATCH_PATH>"
    nvidia_dir = facts.nvidia_dir or "<repo>/closed/NVIDIA"
    changes: list[Change] = []

    def in_container(argv: Sequence[str]) -> Command:
        return cmd(
            "docker",
            "exec",
            "-u",
            f"{facts.user.uid}:{facts.user.gid}" if facts.user else user,
            "-w",
            CONTAINER_WORKDIR,
            name,
            *argv,
        )

    changes.append(
        Change(
            f"make sure the scratch folders exist under {scratch}",
            (cmd("mkdir", "-p", *(f"{scratch}/{d}" for d in ("data", "models", "preprocessed_data"))),),
        )
    )
    if params.ContainerImage:
        image_summary = f"use the image {params.ContainerImage}"
    else:
        image_summary = (
            f"build the harness image mlperf-inference:{user}-{facts.machine} from the repository's "
            "docker/release/Dockerfile and docker/Dockerfile.user (skipped when already built for this commit)"
        )
    changes.append(Change(image_summary))
    status = facts.container_status or "absent"
    changes.append(
        Change(
            f"container {name}: {'keep it running' if status == 'running' else 'start it (' + status + ')'}"
            "; checked before every exec and recreated when gone"
        )
    )
    pending = [s for s in SETUP_STAGES if not facts.done.get(setup_key(scratch, settings.model, s))]
    if pending:
        changes.append(
            Change(
                f"set up {settings.model}: {', '.join(pending)} (BENCHMARKS={settings.model} only)",
                tuple(
                    in_container(make_argv(s, {"BENCHMARKS": settings.model, "EXTERNAL_USER": "1"})) for s in pending
                ),
            )
        )
    else:
        notes.append(f"setup of {settings.model} already done ({', '.join(SETUP_STAGES)})")
    if facts.done.get(build_key(nvidia_dir, facts.commit)) and facts.build_exists:
        notes.append(f"make build already done for commit {(facts.commit or '')[:12]}")
    else:
        changes.append(
            Change(
                f"make build (harness commit {(facts.commit or 'unknown')[:12]})",
                (in_container(make_argv("build", {"EXTERNAL_USER": "1"})),),
            )
        )
    if params.RequireCustomSystemSupport:
        targets = ", ".join(f"configs/{settings.model}/{s}/custom.py" for s in settings.scenarios)
        changes.append(
            Change(
                "register this host as a custom system if the harness does not know it: "
                f"code/common/systems/custom_list.py (marked block) and {targets}, values from gpuconfigs/"
            )
        )
    conf = f"build/workload/user-{run_id}-{settings.model}.conf" if settings.overrides else None
    if conf:
        changes.append(Change(f"write {conf}: " + "; ".join(o.line() for o in settings.overrides)))
    for mode in settings.test_modes:
        args = run_args(
            model=settings.model,
            scenarios=settings.scenarios,
            config_version=",".join(settings.config_versions),
            test_mode=mode,
            quick=params.Quick,
            version=version,
            user_conf_path=conf,
        )
        changes.append(
            Change(
                f"run {settings.model} {','.join(settings.scenarios)} {mode}"
                + (f" (quick: {version.quick_flag})" if params.Quick else ""),
                (
                    in_container(
                        make_argv(
                            "run",
                            {"RUN_ARGS": args, "LOG_DIR": log_dir(run_id, settings.model, mode), "EXTERNAL_USER": "1"},
                        )
                    ),
                ),
            )
        )
    if facts.docker_problem:
        notes.append(facts.docker_problem)
    return StepPlan(changes=tuple(changes), notes=tuple(notes))


# -- the step ------------------------------------------------------------------------------------
class MLPerfExecutor(Step):
    """Runs one model's scenarios in NVIDIA's harness container, in performance and accuracy mode."""

    type_name: ClassVar[str] = "MLPerfExecutor"
    Parameters: ClassVar[type[StepParameters]] = MLPerfParameters

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, MLPerfParameters)
        settings_of(params)
        if params.SystemDescription:
            try:
                parse_system_description(params.SystemDescription)
            except ValueError as exc:
                raise ValueError(f"SystemDescription: {exc}") from None

    @property
    def p(self) -> MLPerfParameters:
        assert isinstance(self.params, MLPerfParameters)
        return self.params

    # -- facts -----------------------------------------------------------------------------------
    def _nvidia_dir(self, ctx: StepContext) -> str | None:
        repo = self.p.RepoPath or ctx.exports.get(package_export(self.p.PackageName))
        if not repo:
            recorded = ctx.state.get(f"GitRepoClone:{self.p.PackageName.lower()}") or {}
            repo = recorded.get("path") if isinstance(recorded, dict) else None
        if not repo:
            return None
        repo = str(repo).rstrip("/")
        if repo.endswith("closed/NVIDIA") or (
            ctx.host.exists(posixpath.join(repo, "VERSION")) and not ctx.host.exists(posixpath.join(repo, "closed"))
        ):
            return repo
        return posixpath.join(repo, "closed", "NVIDIA")

    def _user(self, host: Host) -> UserFacts:
        name = (self.p.Username or "").strip()
        if not name:
            sudo_user = host.run(cmd("printenv", "SUDO_USER", timeout=30)).stdout.strip()
            name = sudo_user or host.identity.user
        out = host.run(
            cmd(
                "sh",
                "-c",
                'id -u "$1" && id -g "$1" && id -gn "$1" && getent passwd "$1" | cut -d: -f6',
                "sh",
                name,
                timeout=30,
            )
        )
        lines = out.stdout.split()
        if not out.ok or len(lines) < 3:
            raise self.fail(
                f"Username: the user {name!r} does not exist on the host", hint="set Username to a real user"
            )
        return UserFacts(name, int(lines[0]), int(lines[1]), lines[2], lines[3] if len(lines) > 3 else f"/home/{name}")

    def gather(self, ctx: StepContext, *, need_docker: bool = True) -> MLPerfFacts:
        host = ctx.host
        nvidia_dir = self._nvidia_dir(ctx)
        notes: list[str] = []
        exists = bool(nvidia_dir and host.exists(nvidia_dir))
        version: HarnessVersion | None = None
        commit: str | None = None
        if nvidia_dir and exists:
            try:
                version = HarnessVersion.parse(host.read_text(posixpath.join(nvidia_dir, "VERSION")))
            except FileNotFoundError:
                notes.append(f"{nvidia_dir}/VERSION is missing")
            except ValueError as exc:
                notes.append(f"{nvidia_dir}/VERSION: {exc}")
            rev = host.run(cmd("git", "-C", nvidia_dir, "rev-parse", "HEAD", timeout=60))
            commit = rev.stdout.strip() if rev.ok else None
        elif nvidia_dir is None:
            notes.append(
                f"repository path unknown: GitRepoClone (PackageName {self.p.PackageName}) has not run yet "
                "and RepoPath is not set"
            )
        scratch = self.p.ScratchPath or ctx.exports.get("MLPERF_SCRATCH_PATH")
        machine = host.run(cmd("uname", "-m", timeout=30)).stdout.strip() or "x86_64"
        user = self._user(host)
        done = ctx.state.get(STATE_KEY) or {}
        facts = MLPerfFacts(
            nvidia_dir=nvidia_dir,
            nvidia_dir_exists=exists,
            version=version,
            commit=commit,
            scratch_path=scratch,
            user=user,
            machine=machine,
            done=done if isinstance(done, dict) else {},
            build_exists=bool(nvidia_dir and host.exists(posixpath.join(nvidia_dir, "build"))),
            notes=notes,
        )
        if need_docker:
            try:
                client = self._docker(ctx)
                facts.container_status = HarnessContainer(client, self._spec(facts, "<image>", host), ctx.log).status()
                client.close()
            except WorkloadError as exc:
                facts.docker_problem = f"docker: {exc.message}"
        return facts

    def plan(self, ctx: StepContext) -> StepPlan:
        return plan_mlperf(self.p, self.gather(ctx))

    # -- docker ----------------------------------------------------------------------------------
    def _docker(self, ctx: StepContext) -> Any:
        from workload.mlperf.container import connect

        url = self.p.DockerBaseUrl
        if not url:
            hostname = getattr(ctx.host, "hostname", None)
            if hostname is not None:  # an SSH host: the docker SDK's paramiko transport
                url = f"ssh://{getattr(ctx.host, 'user', 'root')}@{hostname}:{getattr(ctx.host, 'port', 22)}"
        return connect(url, host_name=ctx.host.name)

    def _spec(self, facts: MLPerfFacts, image: str, host: Host) -> ContainerSpec:
        assert facts.user is not None
        mounts: list[tuple[str, str, str]] = []
        # launch_docker's mounts, where the host has them (docker refuses a missing bind source).
        if host.exists(facts.user.home):
            mounts.append((facts.user.home, f"/mnt{facts.user.home}", "rw"))
        for path in ("/etc/timezone", "/etc/localtime"):
            if host.exists(path):
                mounts.append((path, path, "ro"))
        return ContainerSpec(
            name=container_name(facts.user.name, facts.machine),
            image=image,
            nvidia_dir=facts.nvidia_dir or "",
            scratch_path=facts.scratch_path or "",
            user=f"{facts.user.uid}:{facts.user.gid}",
            use_gpus=self.p.UseGpus,
            unlimited_memlock=self.p.UnlimitedMemlock,
            mounts=tuple(mounts),
        )

    def _image(self, ctx: StepContext, client: Any, facts: MLPerfFacts) -> str:
        """The image to run: the given one, or the repository's recipe built (once per recipe)."""
        from workload.mlperf.container import build_image, cli_build_command, image_label, named_contexts, tar_context

        if self.p.ContainerImage:
            if image_label(client, self.p.ContainerImage, "x") is None:
                ctx.log(f"pulling {self.p.ContainerImage}")
                client.images.pull(self.p.ContainerImage)
            return self.p.ContainerImage
        assert facts.user is not None and facts.nvidia_dir is not None
        host = ctx.host
        release = posixpath.join(facts.nvidia_dir, "docker", "release")
        user_file = posixpath.join(facts.nvidia_dir, "docker", "Dockerfile.user")
        if not host.exists(posixpath.join(release, "Dockerfile")):
            raise self.fail(
                f"{release}/Dockerfile is missing: this is not NVIDIA's harness layout",
                ctx,
                hint="set ContainerImage to run a ready image instead",
            )
        tag = f"mlperf-inference:{facts.user.name}-{facts.machine}"
        # Named build contexts (``COPY --from=common``) come from docker/<name> beside docker/release,
        # as NVIDIA's Makefile passes them (``--build-context common=docker/common``).
        contexts: dict[str, str] = {}
        for name in named_contexts(host.read_text(posixpath.join(release, "Dockerfile"))):
            path = posixpath.join(facts.nvidia_dir, "docker", name)
            if not host.exists(path):
                raise self.fail(
                    f"{release}/Dockerfile needs the build context {name!r}, but {path} is missing",
                    ctx,
                    hint="set ContainerImage to run a ready image instead",
                )
            contexts[name] = path
        context = self._tar(ctx, release)
        context_hash = hashlib.sha256(context)
        for name, path in sorted(contexts.items()):
            context_hash.update(name.encode() + self._tar(ctx, path))
        user_recipe = host.read_text(user_file) if host.exists(user_file) else ""
        context_hash.update(
            user_recipe.encode() + (self.p.BaseImage or "").encode() + f"{facts.user.uid}:{facts.user.gid}".encode()
        )
        recipe = context_hash.hexdigest()[:16]
        if not self.p.BuildImage or image_label(client, tag, "workload.recipe") == recipe:
            if image_label(client, tag, "workload.recipe") is None:
                raise self.fail(f"image {tag} is not there and BuildImage is false", ctx)
            return tag
        args = {"BASE_IMAGE": self.p.BaseImage} if self.p.BaseImage else {}
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
            ctx.log(f"building {tag} (adds user {facts.user.name}) from docker/Dockerfile.user")
            build_image(
                client,
                context=tar_context({"Dockerfile": user_recipe.encode()}),
                dockerfile="Dockerfile",
                tag=tag,
                buildargs={
                    "BASE_IMAGE": latest,
                    "UID": str(facts.user.uid),
                    "GID": str(facts.user.gid),
                    "USER": facts.user.name,
                    "GROUP": facts.user.group,
                },
                labels={"workload.recipe": recipe},
                on_line=ctx.line_sink(echo=False),
            )
        return tag

    @staticmethod
    def _tar(ctx: StepContext, folder: str) -> bytes:
        """The folder on the host as a tarball (a build context, and what its recipe hash covers)."""
        host = ctx.host
        tmp = host.run(cmd("mktemp", timeout=30)).stdout.strip()
        try:
            ctx.check(cmd("tar", "-C", folder, "-cf", tmp, "."))
            return host.read_bytes(tmp)
        finally:
            host.run(cmd("rm", "-f", tmp, timeout=30))

    # -- apply -----------------------------------------------------------------------------------
    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        settings = settings_of(self.p)
        facts = self.gather(ctx, need_docker=False)
        if facts.nvidia_dir is None or not facts.nvidia_dir_exists:
            raise self.fail(
                f"the harness repository is not there ({facts.nvidia_dir or 'path unknown'})",
                ctx,
                hint="run GitRepoClone first (same PackageName) or set RepoPath",
            )
        if not facts.scratch_path:
            raise self.fail(
                "no scratch path: MountDisks exported no MLPERF_SCRATCH_PATH and ScratchPath is not set",
                ctx,
                hint="add MountDisks before this action or set ScratchPath",
            )
        version = facts.version or ASSUMED_VERSION
        host = ctx.host
        scratch = facts.scratch_path
        ctx.check(cmd("mkdir", "-p", *(posixpath.join(scratch, d) for d in ("data", "models", "preprocessed_data"))))
        client = self._docker(ctx)
        try:
            image = self._image(ctx, client, facts)
            container = HarnessContainer(client, self._spec(facts, image, host), ctx.log)
            # The system check comes first: an unknown system must not cost hours of downloads.
            self._custom_system(ctx, container, facts, settings, version)
            self._setup(ctx, container, facts, settings.model)
            run_id = self._run_id(ctx, facts.nvidia_dir, settings)
            conf = None
            if settings.overrides:
                conf = f"build/workload/user-{run_id}-{settings.model}.conf"
                host.check(cmd("mkdir", "-p", posixpath.join(facts.nvidia_dir, "build", "workload")))
                host.write_text(
                    posixpath.join(facts.nvidia_dir, conf),
                    render_user_conf(
                        settings.overrides, header=f"LoadGen overrides written by workload for {settings.model}"
                    ),
                )
            self._runs(ctx, container, facts, settings, version, run_id, conf)
        finally:
            client.close()

    @staticmethod
    def _run_id(ctx: StepContext, nvidia_dir: str, settings: Settings) -> str:
        """A run id (``<date>-<time>-<iteration>``, then ``.1``, ``.2``...) none of whose LOG_DIRs exist yet.

        Results are found by their LOG_DIR path; a LOG_DIR used before (two actions of one model
        started within the same second) would hand back the earlier action's results as this one's.
        """
        base = time.strftime("%Y%m%d-%H%M%S") + f"-{ctx.iteration}"
        run_id, n = base, 0
        while any(
            ctx.host.exists(posixpath.join(nvidia_dir, log_dir(run_id, settings.model, mode)))
            for mode in settings.test_modes
        ):
            n += 1
            run_id = f"{base}.{n}"
        return run_id

    def _exec(self, ctx: StepContext, container: HarnessContainer, target: str, argv: list[str]) -> str:
        ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
        code, output = container.exec(argv, on_line=ctx.line_sink())
        ctx.log(f"# exit {code}")
        if code != 0:
            raise self.fail(
                f"make {target} failed in the container (exit {code}); last lines:\n{_tail(output, 15)}", ctx
            )
        return output

    def _mark(self, ctx: StepContext, key: str) -> None:
        done = dict(ctx.state.get(STATE_KEY) or {})
        done[key] = time.strftime("%Y-%m-%dT%H:%M:%S")
        ctx.state.set(STATE_KEY, done)

    def _setup(self, ctx: StepContext, container: HarnessContainer, facts: MLPerfFacts, model: str) -> None:
        assert facts.scratch_path and facts.nvidia_dir
        done = ctx.state.get(STATE_KEY) or {}
        for stage in SETUP_STAGES:
            key = setup_key(facts.scratch_path, model, stage)
            if done.get(key):
                ctx.log(f"{stage} for {model}: already done ({done[key]})")
                continue
            self._exec(
                ctx,
                container,
                f"{stage} BENCHMARKS={model}",
                make_argv(stage, {"BENCHMARKS": model, "EXTERNAL_USER": "1"}),
            )
            self._mark(ctx, key)
        key = build_key(facts.nvidia_dir, facts.commit)
        if done.get(key) and ctx.host.exists(posixpath.join(facts.nvidia_dir, "build")):
            ctx.log(f"make build: already done for commit {(facts.commit or '')[:12]}")
            return
        self._exec(ctx, container, "build", make_argv("build", {"EXTERNAL_USER": "1"}))
        self._mark(ctx, key)

    # -- custom systems --------------------------------------------------------------------------
    def _system(self, ctx: StepContext) -> HostSystem:
        if self.p.SystemDescription:
            return parse_system_description(self.p.SystemDescription)
        from workload.mlperf.system import read_host_system

        return read_host_system(ctx.host)

    def _system_text(self, ctx: StepContext) -> str:
        try:
            return self._system(ctx).describe()
        except WorkloadError as exc:
            return f"GPU/CPU could not be read: {exc.message}"

    def _harness_system_id(self, ctx: StepContext, container: HarnessContainer, facts: MLPerfFacts) -> str | None:
        """The system id the harness's own script detects: "" when it knows none, None when there is no script."""
        assert facts.nvidia_dir
        if not ctx.host.exists(posixpath.join(facts.nvidia_dir, "scripts", "get_system_id.py")):
            return None
        code, output = container.exec(["python3", "-m", "scripts.get_system_id"], on_line=ctx.line_sink(echo=False))
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        known = code == 0 and bool(lines) and lines[-1] != "None" and results.UNKNOWN_SYSTEM_TEXT not in output
        ctx.log(f"harness system id: {lines[-1] if known else 'none (not a known system)'}")
        return lines[-1] if known else ""

    def _custom_system(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
    ) -> None:
        assert facts.nvidia_dir
        detected = self._harness_system_id(ctx, container, facts)
        if not self.p.RequireCustomSystemSupport:
            if detected == "":
                raise self.fail(
                    f"the harness does not recognise this system ({self._system_text(ctx)}) and would run nothing",
                    ctx,
                    hint="set the parameter RequireCustomSystemSupport=true to register it as a custom system",
                )
            return
        from workload.mlperf.gpuconfigs import load_table

        try:
            system = self._system(ctx)
        except ValueError as exc:
            raise self.fail(f"SystemDescription: {exc}", ctx) from None
        table = load_table()
        sku = table.sku_for_gpu(system.gpu_name)
        sid = custom_system.system_id(system, sku)
        if detected and detected != sid:
            # NVIDIA's own entry (or someone else's custom one) matches; ours would compete with it.
            ctx.log(f"the harness knows this system as {detected}; no custom system needed")
            return
        files = [
            custom_system.custom_config(
                table.resolve(system.gpu_name, system.gpu_count, settings.model, s),
                sid,
                version,
                settings.config_versions,
            )
            for s in settings.scenarios
        ]
        try:
            written = custom_system.install(
                ctx.host, facts.nvidia_dir, custom_system.custom_list_block(system, sku), files
            )
        except custom_system.CustomSystemError as exc:
            raise self.fail(str(exc), ctx) from None
        ctx.log(f"registered custom system {sid} ({system.describe()}): {', '.join(written)}")

    # -- runs and results ------------------------------------------------------------------------
    def _runs(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
        run_id: str,
        conf: str | None,
    ) -> None:
        assert facts.nvidia_dir
        problems: list[str] = []
        for mode in settings.test_modes:
            logs = log_dir(run_id, settings.model, mode)
            args = run_args(
                model=settings.model,
                scenarios=settings.scenarios,
                config_version=",".join(settings.config_versions),
                test_mode=mode,
                quick=self.p.Quick,
                version=version,
                user_conf_path=conf,
            )
            argv = make_argv("run", {"RUN_ARGS": args, "LOG_DIR": logs, "EXTERNAL_USER": "1"})
            ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
            code, output = container.exec(argv, on_line=ctx.line_sink())
            ctx.log(f"# exit {code}")
            found = results.find_results(ctx.host, posixpath.join(facts.nvidia_dir, logs), mode)
            self._keep(ctx, found, logs)
            have = {f.expected for f in found}
            if code != 0:
                problems.append(f"make run ({mode}) failed with exit {code}; last lines:\n{_tail(output, 10)}")
            for scenario in settings.scenarios:
                expected = results.Expected(settings.model, scenario, mode)
                if expected not in have:
                    why = results.explain_missing(expected, output, system_text=None)
                    if "did not recognise" in why:
                        why = results.explain_missing(expected, output, system_text=self._system_text(ctx))
                    problems.append(f"no result for {expected}: {why}")
            ctx.log(f"{mode}: {len(found)} result folder(s) in {logs}")
        if problems:
            kept = f" ({len(ctx.results)} result folder(s) kept)" if ctx.results else ""
            raise StepError(self.label, "; ".join(problems) + kept, host=ctx.host.name)

    def _keep(self, ctx: StepContext, found: Sequence[results.Found], logs: str) -> None:
        from workload.hosts.local import LocalHost

        for item in found:
            if isinstance(ctx.host, LocalHost):
                ctx.results.append(Path(item.directory))
            else:
                destination = ctx.host_dir / "mlperf" / posixpath.basename(logs)
                ctx.results.append(results.copy_local(ctx.host, item, destination))


def package_export(package: str) -> str:
    """The export name under which GitRepoClone publishes a clone's path: ``MLPERF_PATH``."""
    from installers.git_clone import export_name

    return f"{export_name(package)}_PATH"


def _tail(output: str, lines: int) -> str:
    kept = [line for line in output.splitlines() if line.strip()][-lines:]
    return "\n".join(f"    {line}" for line in kept)
