"""``MLPerfExecutor``: NVIDIA's MLPerf Inference harness, run in its container on the host.

Compatible with VirtualClient's MLPerfExecutor parameters (``Model``, ``Username``, ``DiskFilter``,
``RequireCustomSystemSupport``, ``Scenario``) and fixing what the reference notes list as its gaps:
per-model setup stages remembered in host state, one ``make build`` per harness commit, a container
that is checked before every exec and recreated when gone, the real short-run flag, engines built
once and ``make run_harness`` per test mode, LoadGen overrides as RUN_ARGS fields (never a user.conf
that would replace the harness's own), results looked up in this run's own LOG_DIR per (benchmark,
scenario, mode), custom systems and missing configs registered through the harness's extension
points, Ctrl-C reaching the running harness, and an SSH host's daemon reached over its own connection.

``plan`` only reads (files, ``git rev-parse``, ``docker inspect``); :func:`plan_mlperf` is the pure
planner. ``apply`` drives the container through the docker SDK.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from workload.commands import cmd
from workload.errors import ProfileError, StepError, WorkloadError
from workload.hosts.base import Host
from workload.mlperf import custom_system, results
from workload.mlperf.catalog import (
    WorkloadSetting,
    workload_setting,
)
from workload.mlperf.container import ContainerSpec, HarnessContainer, container_name
from workload.mlperf.gpuconfigs import ResolvedConfig, gpu_count_problem
from workload.mlperf.harness import (
    SETUP_STAGES,
    HarnessVersion,
    log_dir,
    log_dir_prefix,
    make_argv,
    run_args,
    run_groups,
)
from workload.mlperf.ops import to_changes
from workload.mlperf.planner import plan_ops
from workload.mlperf.registrations import Registration, registrations
from workload.mlperf.settings import (
    STATE_KEY,
    MLPerfFacts,
    MLPerfParameters,
    Settings,
    UserFacts,
    build_key,
    settings_of,
    setup_key,
)
from workload.mlperf.system import HostSystem, parse_system_description
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan

ASSUMED_VERSION = HarnessVersion(4, 1)
#: What NVIDIA's ``scripts/get_system_id.py`` prints (v4.1: ``print(MATCHED_SYSTEM)``): ``None`` for a
#: machine no KnownSystem matches, ``KnownSystem.<member>`` for one that does; exit 0 either way.
KNOWN_SYSTEM_LINE = re.compile(r"^KnownSystem\.([A-Za-z_][A-Za-z0-9_]*)$")


def plan_mlperf(params: MLPerfParameters, facts: MLPerfFacts, *, run_id: str = "<run id>") -> StepPlan:
    """The pure planner's ops (:func:`workload.mlperf.planner.plan_ops`) as the changes ``plan`` prints."""
    planned = plan_ops(params, facts, run_id=run_id)
    changes = tuple(Change(c.summary, c.commands) for c in to_changes(planned.ops))
    return StepPlan(changes=changes, notes=planned.notes)


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
            recorded = ctx.state.mapping(f"GitRepoClone:{self.p.PackageName.lower()}")
            repo = recorded.get("path") if isinstance(recorded.get("path"), str) else None
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
        done = ctx.state.mapping(STATE_KEY)
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
        """A docker client for the host's daemon.

        An SSH host's daemon is reached over the host's own SSH connection (same keys, same host-key
        check, sudo when the user may not open the socket); ``tcp://`` URLs are used as given.
        """
        from workload.hosts.ssh import SshHost
        from workload.mlperf.container import connect

        url = self.p.DockerBaseUrl
        if isinstance(ctx.host, SshHost) and not (url or "").startswith("tcp://"):
            from workload.mlperf.docker_ssh import connect_over_host

            return connect_over_host(ctx.host, url, log=ctx.log)
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
            # Ctrl-C must reach the docker execs too: the host's transport does not run them.
            with host.on_interrupt(container.stop):
                # The system check comes first: an unknown system must not cost hours of downloads.
                blocked = self._prepare_system(ctx, container, facts, settings, version)
                self._refuse_if_nothing_can_run(ctx, settings, blocked)
                self._setup(ctx, container, facts, settings.model)
                run_id = self._run_id(ctx, facts.nvidia_dir, settings)
                self._runs(ctx, container, facts, settings, version, run_id, blocked)
        finally:
            client.close()

    def _refuse_if_nothing_can_run(
        self, ctx: StepContext, settings: Settings, blocked: dict[tuple[str, str], str]
    ) -> None:
        """Stop before any download when no (scenario, benchmark) of this action can run, naming each reason."""
        if all((s, b) in blocked for s in settings.scenarios for b in settings.benchmarks):
            problems = [
                f"no result for {benchmark} {scenario} ({', '.join(settings.test_modes)}): {why}"
                for (scenario, benchmark), why in blocked.items()
            ]
            raise StepError(self.label, "; ".join(problems) + " (nothing set up or run)", host=ctx.host.name)

    @staticmethod
    def _run_id(ctx: StepContext, nvidia_dir: str, settings: Settings) -> str:
        """A run id (``<date>-<time>-<iteration>``, then ``.1``, ``.2``...) none of whose LOG_DIRs exist yet.

        Results are found by their LOG_DIR path; a LOG_DIR used before (two actions of one model
        started within the same second) would hand back the earlier action's results as this one's.
        """
        logs = posixpath.join(nvidia_dir, "build", "logs")
        listing = ctx.host.run(cmd("ls", "-1", logs, timeout=60)).stdout.split() if ctx.host.exists(logs) else []
        base = time.strftime("%Y%m%d-%H%M%S") + f"-{ctx.iteration}"
        run_id, n = base, 0
        while any(
            posixpath.join("build", "logs", name).startswith(log_dir_prefix(run_id, settings.model)) for name in listing
        ):
            n += 1
            run_id = f"{base}.{n}"
        return run_id

    def _exec(self, ctx: StepContext, container: HarnessContainer, target: str, argv: list[str]) -> str:
        ctx.stop_if_cancelled(f"make {target}")
        ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
        code, output = container.exec(argv, on_line=ctx.line_sink())
        ctx.log(f"# exit {code}")
        if code != 0:
            raise self.fail(
                f"make {target} failed in the container (exit {code}); last lines:\n{_tail(output, 15)}", ctx
            )
        return output

    def _mark(self, ctx: StepContext, key: str) -> None:
        # merged on the host: stages another run marked meanwhile (another model) are kept
        ctx.state.merge(STATE_KEY, {key: time.strftime("%Y-%m-%dT%H:%M:%S")})

    def _setup(self, ctx: StepContext, container: HarnessContainer, facts: MLPerfFacts, model: str) -> None:
        assert facts.scratch_path and facts.nvidia_dir
        done = ctx.state.mapping(STATE_KEY)
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

    def _harness_member(self, ctx: StepContext, container: HarnessContainer, facts: MLPerfFacts) -> str | None:
        """The ``KnownSystem`` member the harness's own script detects: "" when it knows none, None without a script.

        NVIDIA's ``scripts/get_system_id.py`` prints ``None`` for an unknown machine and
        ``KnownSystem.<member>`` for a known one (our custom systems included), exit 0 either way;
        anything else (a crash, an import error, other text) is a step failure that shows its output.
        """
        assert facts.nvidia_dir
        if not ctx.host.exists(posixpath.join(facts.nvidia_dir, "scripts", "get_system_id.py")):
            return None
        argv = ["python3", "-m", "scripts.get_system_id"]
        code, output = container.exec(argv, on_line=ctx.line_sink(echo=False))
        # The answer is the last line that is one (the harness's logging may surround it).
        answers = [
            line.strip()
            for line in output.splitlines()
            if line.strip() == "None" or KNOWN_SYSTEM_LINE.match(line.strip())
        ]
        last = answers[-1] if answers else ""
        if code == 0 and last == "None":
            ctx.log("harness system: None (no KnownSystem matches this machine)")
            return ""
        match = KNOWN_SYSTEM_LINE.match(last)
        if code != 0 or match is None:
            raise self.fail(
                f"the harness's system detection failed: `{' '.join(argv)}` exited {code} "
                f"without printing None or KnownSystem.<name>; its output:\n{_tail(output, 20) or '    (none)'}",
                ctx,
                hint="fix the harness or the container (the output above says what broke), then run again",
            )
        ctx.log(f"harness system: {last}")
        return match.group(1)

    def _registered(self, ctx: StepContext, nvidia_dir: str, model: str, scenario: str) -> set[Registration]:
        """What the harness registers for (model, scenario), from its config files (ours excluded)."""
        sources = []
        for name in ("__init__.py", "custom.py"):
            path = posixpath.join(nvidia_dir, "configs", model, scenario, name)
            if not ctx.host.exists(path):
                continue
            text = ctx.host.read_text(path)
            if name == "custom.py" and custom_system.is_ours(text):
                continue  # ours is regenerated below
            sources.append((f"configs/{model}/{scenario}/{name}", text))
        try:
            return registrations(sources)
        except ValueError as exc:
            raise self.fail(f"cannot read the harness's configs: {exc}", ctx) from None

    def _prepare_system(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
    ) -> dict[tuple[str, str], str]:
        """Make the harness able to run this host: know the system and have a config for every expected result.

        Returns why each (scenario, benchmark) that still cannot run cannot (the other results run).
        An unknown system without RequireCustomSystemSupport is an error naming the GPU/CPU and the
        parameter. With it, an unknown system is registered as a custom system, and a known one
        gets the configs NVIDIA has none for (NVIDIA's files are never changed).
        """
        assert facts.nvidia_dir
        detected = self._harness_member(ctx, container, facts)
        if not self.p.RequireCustomSystemSupport:
            if detected == "":
                raise self.fail(
                    f"the harness does not recognise this system ({self._system_text(ctx)}) and would run nothing",
                    ctx,
                    hint="set the parameter RequireCustomSystemSupport=true to register it as a custom system",
                )
            member = detected
            if not member:
                return {}  # nothing to check against; the results check explains what is missing

            def unregistered(scenario: str, setting: str) -> str:
                return (
                    f"NVIDIA's harness has no {settings.model} {scenario} config for {member} ({setting}); set the "
                    "parameter RequireCustomSystemSupport=true to add one from gpuconfigs/"
                )

            registered = {s: self._registered(ctx, facts.nvidia_dir, settings.model, s) for s in settings.scenarios}
            return self._missing_registrations(settings, member, registered, unregistered)
        return self._add_configs(ctx, container, facts, settings, version, detected)

    @staticmethod
    def _missing_registrations(
        settings: Settings,
        member: str,
        registered: dict[str, set[Registration]],
        why: Callable[[str, str], str],
    ) -> dict[tuple[str, str], str]:
        """(scenario, benchmark) -> ``why(scenario, setting)`` for each result no registered config can produce."""
        blocked: dict[tuple[str, str], str] = {}
        for scenario in settings.scenarios:
            for benchmark in settings.benchmarks:
                needed = [workload_setting(settings.model, cv) for cv in settings.versions_of(benchmark)]
                if not any(Registration(member, s) in registered[scenario] for s in needed):
                    shown = needed[0]
                    blocked[(scenario, benchmark)] = why(scenario, f"{shown.harness}, {shown.accuracy}, {shown.power}")
        return blocked

    def _add_configs(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
        detected: str | None,
    ) -> dict[tuple[str, str], str]:
        """RequireCustomSystemSupport: register a custom system (unknown host) and the configs the harness lacks.

        A known system (NVIDIA's entry matched; ours from an earlier run does not count: it is
        regenerated) needs no host facts unless a config is missing.
        """
        assert facts.nvidia_dir
        from workload.mlperf.gpuconfigs import load_table

        model = settings.model
        registered: dict[str, set[Registration]] = {s: set() for s in settings.scenarios}
        member: str | None = None
        if detected and not detected.startswith(custom_system.SYSTEM_ID_PREFIX):
            # NVIDIA's own entry matches (Azure ND96asr_v4 is A100_SXM4_40GBx8): add only what it lacks.
            member = detected
            ctx.log(f"the harness knows this system as KnownSystem.{member}")
            registered = {s: self._registered(ctx, facts.nvidia_dir, model, s) for s in settings.scenarios}
            lacking = self._missing_registrations(settings, member, registered, lambda scenario, setting: setting)
            if not lacking:
                self._install(ctx, facts.nvidia_dir, None, [], settings, f"configs for KnownSystem.{member}")
                return {}
        try:
            system = self._system(ctx)
        except ValueError as exc:
            raise self.fail(f"SystemDescription: {exc}", ctx) from None
        try:
            table = load_table()
            sku = table.sku_for_gpu(system.gpu_name)
        except ProfileError as exc:
            if member is None:
                raise self.fail(exc.message, ctx, hint=exc.hint) from None
            return {
                key: f"NVIDIA's harness has no {model} {key[0]} config for {member} ({setting}), and gpuconfigs/ "
                f"has no values to add one: {exc.problem}"
                for key, setting in lacking.items()
            }
        if member is None:
            member = custom_system.system_id(system, sku)
            class_base, block = custom_system.class_name(member), custom_system.custom_list_block(system, sku)
            what = f"custom system {member} ({system.describe()})"
        else:
            class_base, block, what = f"WL_{member}", None, f"configs for KnownSystem.{member}"
        blocked: dict[tuple[str, str], str] = {}
        files: list[custom_system.GeneratedFile] = []
        for scenario in settings.scenarios:
            classes: list[tuple[WorkloadSetting, ResolvedConfig]] = []
            for benchmark in settings.benchmarks:
                available, problems = False, []
                for cv in settings.versions_of(benchmark):
                    setting = workload_setting(model, cv)
                    if Registration(member, setting) in registered[scenario] or any(s == setting for s, _ in classes):
                        available = True
                        continue
                    high = setting.accuracy == "k_99_9"
                    problem = table.entry_problem(system.gpu_name, model, scenario, high_accuracy=high)
                    if problem is not None:
                        problems.append(problem)
                        continue
                    resolved = table.resolve(system.gpu_name, system.gpu_count, model, scenario, high_accuracy=high)
                    unrunnable = gpu_count_problem(resolved)
                    if unrunnable is not None:
                        problems.append(f"not generated: {unrunnable}")
                        continue
                    classes.append((setting, resolved))
                    available = True
                if not available:
                    blocked[(scenario, benchmark)] = problems[0]
            if classes:
                files.append(custom_system.custom_config(model, scenario, member, class_base, classes, version))
        self._install(ctx, facts.nvidia_dir, block, files, settings, what)
        for (scenario, benchmark), why in blocked.items():
            ctx.log(f"cannot run {benchmark} {scenario}: {why}")
        return blocked

    def _install(
        self,
        ctx: StepContext,
        nvidia_dir: str,
        block: str | None,
        files: list[custom_system.GeneratedFile],
        settings: Settings,
        what: str,
    ) -> None:
        """Write the generated files; remove our custom.py of this run's other scenarios (they need none now)."""
        written_paths = {f.path for f in files}
        remove = [
            path
            for path in (custom_system.custom_config_path(settings.model, s) for s in settings.scenarios)
            if path not in written_paths
        ]
        try:
            written = custom_system.install(ctx.host, nvidia_dir, block, files, remove)
        except custom_system.CustomSystemError as exc:
            raise self.fail(str(exc), ctx) from None
        ctx.log(f"registered {what}: {', '.join(written) or 'nothing was missing'}")

    # -- runs and results ------------------------------------------------------------------------
    def _runs(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
        run_id: str,
        blocked: dict[tuple[str, str], str],
    ) -> None:
        """``make generate_engines`` once, then ``make run_harness`` per test mode (and override group).

        Every expected (benchmark, scenario, mode) must produce a result folder in its run's LOG_DIR;
        each missing one is named with the reason, after every run is done and its results kept.
        """
        assert facts.nvidia_dir
        model = settings.model
        problems: list[str] = []
        for (scenario, benchmark), why in blocked.items():
            problems.append(f"no result for {benchmark} {scenario} ({', '.join(settings.test_modes)}): {why}")
        runnable = [s for s in settings.scenarios if any((s, b) not in blocked for b in settings.benchmarks)]
        if not runnable:
            raise StepError(self.label, "; ".join(problems), host=ctx.host.name)
        engines = run_args(model=model, scenarios=runnable, config_version=settings.config_version, version=version)
        code, engine_output = self._make(ctx, container, "generate_engines", {"RUN_ARGS": engines})
        if code != 0:
            problems.append(
                f"make generate_engines failed with exit {code}, so nothing ran; "
                f"last lines:\n{_tail(engine_output, 10)}"
            )
            raise StepError(self.label, "; ".join(problems), host=ctx.host.name)
        groups = run_groups(model, runnable, settings.overrides)
        for mode in settings.test_modes:
            for index, group in enumerate(groups, 1):
                logs = log_dir(run_id, model, mode, index)
                args = run_args(
                    model=model,
                    scenarios=group.scenarios,
                    config_version=settings.config_version,
                    version=version,
                    test_mode=mode,
                    quick=self.p.Quick,
                    fields=group.fields,
                )
                code, output = self._make(ctx, container, "run_harness", {"RUN_ARGS": args, "LOG_DIR": logs})
                found = results.find_results(ctx.host, posixpath.join(facts.nvidia_dir, logs), mode)
                self._keep(ctx, found, logs)
                have = {f.expected for f in found}
                if code != 0:
                    problems.append(
                        f"make run_harness ({','.join(group.scenarios)} {mode}) failed with exit {code}; "
                        f"last lines:\n{_tail(output, 10)}"
                    )
                for scenario in group.scenarios:
                    for benchmark in settings.benchmarks:
                        if (scenario, benchmark) in blocked:
                            continue
                        expected = results.Expected(model, benchmark, scenario, mode)
                        if expected not in have:
                            problems.append(
                                f"no result for {expected}: {self._why(ctx, expected, engine_output + output)}"
                            )
                ctx.log(f"{mode}: {len(found)} result folder(s) in {logs}")
        if problems:
            kept = f" ({len(ctx.results)} result folder(s) kept)" if ctx.results else ""
            raise StepError(self.label, "; ".join(problems) + kept, host=ctx.host.name)

    def _make(
        self, ctx: StepContext, container: HarnessContainer, target: str, variables: dict[str, str]
    ) -> tuple[int, str]:
        ctx.stop_if_cancelled(f"make {target}")  # after Ctrl-C no further harness run starts
        argv = make_argv(target, {**variables, "EXTERNAL_USER": "1"})
        ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
        code, output = container.exec(argv, on_line=ctx.line_sink())
        ctx.log(f"# exit {code}")
        return code, output

    def _why(self, ctx: StepContext, expected: results.Expected, output: str) -> str:
        custom = self.p.RequireCustomSystemSupport
        why = results.explain_missing(expected, output, system_text=None, custom_support=custom)
        if "did not recognise" in why:
            why = results.explain_missing(expected, output, system_text=self._system_text(ctx), custom_support=custom)
        return why

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
