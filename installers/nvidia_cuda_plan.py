"""NvidiaCudaInstallation's pure judgments: the target version, the preflight check, the plan, verify.

Moved out of :mod:`workload.installers.nvidia_cuda` (which re-exports every name and states the contract):
:func:`check_possible`, :func:`plan_nvidia_cuda` and :func:`verify_problems` are pure functions
of (parameters, facts); they share the version matching (``_versions_for``, ``_match_upstream``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace

from workload.commands import Command, cmd
from workload.facts.nvidia import (
    FABRIC_MANAGER_UNIT,
    GpuInventory,
)
from workload.facts.packages import (
    compare_versions,
    newest,
    upstream_version,
)
from workload.facts.system import (
    UserHome,
    unsupported_platform,
)
from workload.installers import apt
from workload.installers.apt import PlanRefused
from workload.installers.download import download_commands
from workload.installers.nvidia_cuda_params import (
    BUILD_PACKAGES,
    RUNFILE_TIMEOUT_S,
    SUPPORTED_UBUNTU,
    CudaFacts,
    NvidiaCudaParameters,
    PreflightFacts,
    VerifyFacts,
    apt_pin_path,
    apt_pin_text,
    bashrc_block,
    cuda_home,
    cuda_repository,
    driver_packages,
    fabric_manager_packages,
    runfile_path,
)
from workload.steps import Change, StepPlan


# -- the pure planner --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Target:
    """The exact versions decided for this host."""

    upstream: str  # e.g. 550.127.05
    driver: dict[str, str]  # package -> full apt version
    fabric_manager: dict[str, str]  # package -> full apt version ({} where FM is not wanted)


def wants_fabric_manager(params: NvidiaCudaParameters, gpus: GpuInventory) -> bool:
    if params.InstallFabricManager == "auto":
        return gpus.nvswitch
    return params.InstallFabricManager == "true"


def _match_upstream(versions: Sequence[str], upstream: str, prefer: str | None) -> str | None:
    matching = [v for v in versions if upstream_version(v) == upstream]
    if prefer in matching:
        return prefer
    return newest(matching)


def _target_upstream(params: NvidiaCudaParameters, facts: CudaFacts) -> tuple[str | None, str | None]:
    """(upstream version, full apt version of the main driver package if known)."""
    main = driver_packages(params)[0]
    policy = facts.packages.policies.get(main)
    installed = facts.packages.version(main)
    wanted = params.LinuxDriverPackageVersion
    if wanted:
        if "-" in wanted:
            return upstream_version(wanted), wanted
        offered = list(policy.available) if policy else []
        if installed:
            offered.append(installed)
        return wanted, _match_upstream(offered, wanted, installed)
    if installed and upstream_version(installed).startswith(params.LinuxDriverVersion + "."):
        return upstream_version(installed), installed  # keep what is installed: re-runs must not upgrade
    best = newest(policy.available) if policy else None
    return (upstream_version(best), best) if best else (None, None)


def _versions_for(facts: CudaFacts | VerifyFacts, name: str) -> list[str]:
    policy = facts.packages.policies.get(name)
    versions = list(policy.available) if policy else []
    installed = facts.packages.version(name)
    if installed:
        versions.append(installed)
    return versions


def _decide_target(params: NvidiaCudaParameters, facts: CudaFacts, fm_wanted: bool) -> _Target | str:
    """The exact versions, or a sentence saying what the package lists lack."""
    upstream, main_full = _target_upstream(params, facts)
    main, *others = driver_packages(params)
    if upstream is None or main_full is None:
        what = f"{main}={params.LinuxDriverPackageVersion}" if params.LinuxDriverPackageVersion else main
        return f"no configured apt source offers {what}"
    driver = {main: main_full}
    for name in others:
        full = _match_upstream(_versions_for(facts, name), upstream, main_full)
        if full is None:
            return f"no configured apt source offers {name} at version {upstream}"
        driver[name] = full
    fabric: dict[str, str] = {}
    if fm_wanted:
        meta, binary = fabric_manager_packages(params)
        meta_full = _match_upstream(_versions_for(facts, meta), upstream, main_full)
        binary_full = _match_upstream(_versions_for(facts, binary), upstream, main_full)
        if binary_full is not None:
            fabric[binary] = binary_full
        if meta_full is not None and (binary_full is None or facts.packages.has_candidate(meta)):
            # NVIDIA's repo: pin the meta package too, so its dependency cannot pull another version.
            fabric[meta] = meta_full
        if not fabric:
            offers = "; ".join(
                f"{n} offers {', '.join(_versions_for(facts, n)[:5]) or 'nothing'}" for n in (meta, binary)
            )
            return f"no configured apt source offers the fabric manager at exactly {upstream} ({offers})"
    return _Target(upstream, driver, fabric)


@dataclass(frozen=True)
class _PinnedSet:
    """Packages that must sit at exact versions and be held together, and how a plan names them."""

    label: str  # "NVIDIA driver 550.127.05 (branch 550)"
    wanted: dict[str, str]  # package -> exact version


def _packages_change(
    sets: Sequence[_PinnedSet], build: Sequence[str], facts: CudaFacts, *, lock_timeout: int
) -> tuple[Change | None, list[bool]]:
    """One apt transaction for every package the step installs: unhold, install, hold (pure).

    ``build`` are packages wanted at any version (the build tools). Driver, fabric manager and
    build tools go to ONE ``apt-get install``: each apt transaction costs a dependency solve, a
    debconf pass, a dpkg run and its triggers (initramfs, ldconfig, man-db on Ubuntu), and one
    transaction cannot leave the fabric manager at another version than the driver it came with.
    Returns the change (None when nothing is missing or unheld) and, per set, whether it installs.
    """
    installs = [{n: v for n, v in s.wanted.items() if facts.packages.version(n) != v} for s in sets]
    to_install = {n: v for missing in installs for n, v in missing.items()}
    wanted = sorted(n for s in sets for n in s.wanted)
    to_hold = sorted(n for n in wanted if n not in facts.packages.holds or n in to_install)
    installing = [bool(missing) for missing in installs]
    if not to_install and not build:
        if not to_hold:
            return None, installing
        return Change(
            f"hold {', '.join(to_hold)} so an upgrade cannot move one without the other", (apt.hold(to_hold),)
        ), installing
    commands: list[Command] = []
    held = sorted(n for n in to_install if n in facts.packages.holds)
    if held:
        commands.append(apt.unhold(held))
    downgrade = any(
        (cur := facts.packages.version(n)) is not None and compare_versions(v, cur) < 0 for n, v in to_install.items()
    )
    pins = [apt.pin(n, v) for n, v in sorted(to_install.items())]
    commands.append(apt.install([*build, *pins], allow_downgrades=downgrade, lock_timeout=lock_timeout))
    if to_hold:
        commands.append(apt.hold(to_hold))
    labels = [s.label for s, missing in zip(sets, installs, strict=True) if missing]
    if build:
        labels.insert(0, f"build tools ({', '.join(build)})")
    summary = "install " + (", ".join(labels[:-1]) + " and " + labels[-1] if len(labels) > 1 else labels[0])
    if pins:
        summary += ", held: " + ", ".join(pins)
    elif to_hold:
        summary += f"; hold {', '.join(to_hold)}"
    return Change(summary, tuple(commands)), installing


def check_possible(params: NvidiaCudaParameters, facts: PreflightFacts) -> None:
    """Raise :class:`PlanRefused` where this step cannot work at all, whatever it installs (pure).

    The step's preflight: the engine asks it before the first step of a run changes anything.
    """
    release, main = facts.os, driver_packages(params)[0]
    if release.id == "debian":
        raise PlanRefused(
            f"{release.label} is not supported by NvidiaCudaInstallation (supported: Ubuntu 22.04, Ubuntu 24.04): "
            f"it installs Ubuntu's {main} packages, which neither Debian's archive nor NVIDIA's Debian "
            "repository ships",
            hint="use Ubuntu 22.04 or 24.04 for GPU hosts; on Debian, install the NVIDIA driver yourself "
            "and leave NvidiaCudaInstallation out of the profile",
        )
    if release.id != "ubuntu" or release.version_id not in SUPPORTED_UBUNTU:
        raise PlanRefused(
            f"{release.label} is not supported (supported: Ubuntu 22.04, Ubuntu 24.04)",
            hint="use Ubuntu 22.04 or 24.04 on x86_64 or aarch64",
        )
    problem = unsupported_platform(release, facts.arch)
    if problem is not None:
        raise PlanRefused(problem, hint="use Ubuntu 22.04 or 24.04 on x86_64 or aarch64")
    origin, gpus = facts.driver_origin, facts.gpus
    if origin.from_runfile:
        version = gpus.driver_version or gpus.library_version
        which = f"NVIDIA driver {version}" if version else "NVIDIA driver"
        remove = f"sudo {origin.uninstaller} --silent" if origin.uninstaller else "sudo nvidia-uninstall --silent"
        raise PlanRefused(
            f"an {which} installed from NVIDIA's .run file is on this host ({origin.smi_path} belongs to no "
            f"package); installing {main} over it would leave two drivers overwriting each other's files",
            hint=f"remove it first ({remove}), reboot, and run again; or keep it and leave "
            "NvidiaCudaInstallation out of the profile",
        )
    gpu_visible = gpus.pci_gpus > 0 or gpus.status in ("ok", "mismatch")
    if not gpu_visible and not facts.allow_no_gpu:
        raise PlanRefused(
            "no NVIDIA GPU is visible on this host's PCI bus, so the driver could not load",
            hint="run this step on a GPU machine, or leave it out with --scenarios -<its Scenario> "
            "(-InstallNvidiaCuda in PERF-GPU-MLPERF)",
        )


def plan_nvidia_cuda(params: NvidiaCudaParameters, facts: CudaFacts) -> StepPlan:
    """Decide what NvidiaCudaInstallation must change on a host with these facts (pure)."""
    check_possible(params, PreflightFacts.of(facts))
    gpus = facts.gpus
    gpu_visible = gpus.pci_gpus > 0 or gpus.status in ("ok", "mismatch")
    fm_wanted = wants_fabric_manager(params, gpus)
    target = _decide_target(params, facts, fm_wanted)
    lock = params.DpkgLockTimeout
    notes: list[str] = []

    if isinstance(target, str):
        if not facts.refreshed:
            # Decide versions only from fresh lists: the preview needs them, and so does exactness.
            # A preview: the refreshed lists decide (the engine reboots on the plan it applies).
            installed = facts.packages.version(driver_packages(params)[0])
            wanted = params.LinuxDriverPackageVersion
            changing = installed is None or (wanted and upstream_version(wanted) != upstream_version(installed))
            return StepPlan(
                changes=(apt.refresh_change(lock_timeout=lock),),
                reboot_required=params.RebootRequired and bool(changing),
                notes=(f"{target} yet; the exact versions are chosen after `apt-get update`",),
            )
        if not facts.cuda_repo_configured:
            repo = cuda_repository(params, facts.os, facts.arch)
            return StepPlan(
                changes=(
                    apt.refresh_change(
                        f"add NVIDIA's CUDA apt repository {repo.source.split()[0]} and refresh the package lists",
                        lock_timeout=lock,
                        before=apt.add_repository(repo),
                    ),
                ),
                reboot_required=params.RebootRequired,
                notes=(f"{target}; NVIDIA's CUDA repository is added for it",),
            )
        raise PlanRefused(
            target,
            hint=f"check `apt-cache policy {driver_packages(params)[0]}`; set LinuxDriverPackageVersion to a version "
            "it lists, or CudaRepository to a repository that has the branch",
        )

    changes: list[Change] = []
    if facts.packages.broken:
        changes.append(
            Change(
                f"finish the interrupted dpkg run ({', '.join(facts.packages.broken[:5])})",
                (apt.wait_for_dpkg_lock(lock), apt.configure_pending()),
            )
        )
    loaded = gpus.driver_version
    build = [p for p in BUILD_PACKAGES if facts.packages.version(p) is None]
    sets = [_PinnedSet(f"NVIDIA driver {target.upstream} (branch {params.LinuxDriverVersion})", target.driver)]
    if fm_wanted:
        installed_fm = facts.fabric_manager.version
        why = f"exactly the driver's version; installed: {installed_fm or 'none'}"
        newest_offered = newest(v for n in target.fabric_manager for v in _versions_for(facts, n))
        if newest_offered and upstream_version(newest_offered) != target.upstream:
            why += f"; the repository's newest is {upstream_version(newest_offered)}"
        sets.append(_PinnedSet(f"fabric manager {target.upstream} ({why})", target.fabric_manager))
    else:
        notes.append(
            "no fabric manager: "
            + ("no NVSwitch on this host" if params.InstallFabricManager == "auto" else "InstallFabricManager is false")
        )
    packages_change, installing = _packages_change(sets, build, facts, lock_timeout=lock)
    driver_installing = installing[0]
    fm_installing = fm_wanted and installing[-1]
    pin_text = apt_pin_text(params, target.upstream)
    if facts.apt_pin != pin_text:
        pin_cmd = cmd("tee", apt_pin_path(params), input=pin_text, sudo=True, timeout=60)
        if packages_change is not None:
            packages_change = Change(packages_change.summary, (pin_cmd, *packages_change.commands))
        else:
            packages_change = Change(
                f"pin branch {params.LinuxDriverVersion} at {target.upstream} in {apt_pin_path(params)}", (pin_cmd,)
            )
    if packages_change is not None:
        changes.append(packages_change)

    if params.CudaRequired and not facts.toolkit_installed:
        url = params.LinuxLocalRunFile or ""
        path = runfile_path(params)
        if not facts.runfile.complete:
            if facts.runfile.tool is None:
                raise PlanRefused("neither curl nor wget is installed, so the CUDA run file cannot be downloaded")
            resume = f", resuming after {facts.runfile.partial_bytes} bytes" if facts.runfile.partial_bytes else ""
            checked = "checked against RunFileSha256" if params.RunFileSha256 else "no RunFileSha256 given to check"
            changes.append(
                Change(
                    f"download the CUDA {params.LinuxCudaVersion} run file to {path} ({checked}{resume})",
                    download_commands(url, path, sha256=params.RunFileSha256, tool=facts.runfile.tool),
                )
            )
        changes.append(
            Change(
                f"install the CUDA {params.LinuxCudaVersion} toolkit into {cuda_home(params)} (toolkit only)",
                (cmd("sh", path, "--silent", "--toolkit", sudo=True, timeout=RUNFILE_TIMEOUT_S),),
            )
        )
    if params.CudaRequired and not facts.bashrc_has_block:
        bashrc = posixpath.join(facts.user.home, ".bashrc")
        changes.append(
            Change(
                f"add CUDA {params.LinuxCudaVersion} to PATH and LD_LIBRARY_PATH in {bashrc} (user {facts.user.name})",
                (_append_as(facts.user, bashrc, bashrc_block(params)),),
            )
        )

    # The driver must be loaded at the target version before anything can use it.
    driver_ready = loaded == target.upstream
    pending_load = not driver_installing and not driver_ready and gpu_visible
    reboot = params.RebootRequired and (driver_installing or pending_load)
    if driver_installing and not params.RebootRequired:
        notes.append("RebootRequired is false: the new driver is loaded at the next reboot")

    if fm_wanted:
        service = facts.fabric_manager.service
        commands: list[Command] = []
        if not service.is_enabled:
            commands.append(cmd("systemctl", "enable", FABRIC_MANAGER_UNIT, sudo=True, timeout=120))
        if driver_ready and not driver_installing and (fm_installing or not service.is_active):
            commands.append(cmd("systemctl", "restart", FABRIC_MANAGER_UNIT, sudo=True, timeout=300))
        elif not driver_ready or driver_installing:
            notes.append("the fabric manager service starts at boot, once the driver is loaded")
        if commands:
            changes.append(Change("enable and start the nvidia-fabricmanager service", tuple(commands)))

    _put_lock_wait_first(changes, lock)
    if not changes:
        if reboot:
            return StepPlan(
                reboot_required=True,
                notes=(
                    f"driver {target.upstream} is installed but the loaded driver is "
                    f"{loaded or gpus.status}: it takes effect after a reboot",
                    *notes,
                ),
            )
        reason = f"driver {target.upstream} installed and held"
        if driver_ready:
            reason += " and loaded"
        if fm_wanted:
            reason += f", fabric manager {facts.fabric_manager.version} matches"
            reason += " and runs" if facts.fabric_manager.service.is_active else ""
        if params.CudaRequired:
            reason += f", CUDA {params.LinuxCudaVersion} toolkit present"
        return StepPlan.noop(reason, notes=tuple(notes))
    if not facts.refreshed and any(_installs(c) for c in changes):
        # Refresh first, then plan again from the fresh lists; what follows is a preview.
        preview = tuple(replace(c, summary=f"(preview) {c.summary}") for c in changes)
        return StepPlan(
            changes=(apt.refresh_change(lock_timeout=lock), *preview),
            reboot_required=reboot,
            notes=("exact versions are confirmed after `apt-get update`", *notes),
        )
    return StepPlan(changes=tuple(changes), reboot_required=reboot, notes=tuple(notes))


def _installs(change: Change) -> bool:
    """Whether the change runs apt-get (which works from the package lists: refresh them first)."""
    return any(c.kind == apt.APT_GET for c in change.commands)


def _put_lock_wait_first(changes: list[Change], lock_timeout: int) -> None:
    """Put one explicit dpkg-lock wait before the first apt/dpkg change (apt's own wait covers the rest)."""
    for i, change in enumerate(changes):
        if any(c.lock == apt.DPKG_LOCK for c in change.commands):
            if not any(c.kind == apt.LOCK_WAIT for c in change.commands):
                changes[i] = Change(change.summary, (apt.wait_for_dpkg_lock(lock_timeout), *change.commands))
            return


def _append_as(user: UserHome, path: str, text: str) -> Command:
    """Append ``text`` to ``path`` as ``user`` (so the file stays theirs), creating it if needed."""
    if user.is_root:
        return cmd("tee", "-a", path, input=text, sudo=True, timeout=60)
    return cmd("tee", "-a", path, input=text, user=user.name, timeout=60)


def verify_problems(params: NvidiaCudaParameters, facts: VerifyFacts) -> list[tuple[str, str]]:
    """What is wrong after apply: (problem, how to fix) pairs, most basic first (pure).

    Every fix is a command apt accepts: full package versions (``550.127.05-0ubuntu0.22.04.1``,
    not ``550.127.05``) taken from what apt offers, with the holds lifted and put back around it.
    """
    problems: list[tuple[str, str]] = []
    drivers = driver_packages(params)
    main = drivers[0]
    installed = facts.packages.version(main)
    if installed is None:
        return [(f"{main} is not installed", "run NvidiaCudaInstallation again (workload run ... --dependencies)")]
    want = params.LinuxDriverPackageVersion or installed
    want_up = upstream_version(want)
    if upstream_version(installed) != want_up:
        problems.append((f"{main} is {installed}, not {want}", _reinstall_fix(drivers, want_up, facts)))
    gpus = facts.gpus
    gpu_visible = gpus.pci_gpus > 0 or gpus.status in ("ok", "mismatch")
    loaded = gpus.driver_version
    if params.RebootRequired and (gpu_visible or not facts.allow_no_gpu) and loaded != want_up:
        state = f"nvidia-smi reports driver {loaded}" if loaded else f"nvidia-smi: {gpus.message or gpus.status}"
        problems.append((f"the loaded NVIDIA driver is not {want_up} ({state})", "reboot the host to load it"))
    fm_wanted = wants_fabric_manager(params, gpus)
    if fm_wanted:
        fm = facts.fabric_manager.version
        reference = loaded or want_up
        if fm != reference:
            fix = _reinstall_fix(fabric_manager_packages(params), reference, facts)
            problems.append((f"fabric manager is {fm or 'not installed'} but the NVIDIA driver is {reference}", fix))
        elif loaded and not facts.fabric_manager.service.is_active:
            problems.append(
                (
                    f"the {FABRIC_MANAGER_UNIT} service is {facts.fabric_manager.service.active}",
                    f"sudo systemctl restart {FABRIC_MANAGER_UNIT}; see why: journalctl -u {FABRIC_MANAGER_UNIT}",
                )
            )
    pinned = [*drivers, *(fabric_manager_packages(params) if fm_wanted else ())]
    loose = [n for n in pinned if facts.packages.version(n) is not None and n not in facts.packages.holds]
    if loose:
        problems.append(
            (
                f"{', '.join(loose)} not held: an apt upgrade can move the driver and the fabric manager apart",
                f"sudo apt-mark hold {' '.join(loose)}",
            )
        )
    if params.CudaRequired and not facts.toolkit_installed:
        why = facts.toolkit_problem or f"{cuda_home(params)}/bin/nvcc does not work"
        problems.append(
            (
                f"the CUDA {params.LinuxCudaVersion} toolkit does not work: {why}",
                f"sudo sh {runfile_path(params)} --silent --toolkit",
            )
        )
    return problems


def _reinstall_fix(names: Sequence[str], upstream: str, facts: VerifyFacts) -> str:
    """Unhold, install ``names`` at the full apt versions of ``upstream``, hold again."""
    pins = []
    for name in names:
        full = _match_upstream(_versions_for(facts, name), upstream, facts.packages.version(name))
        if full is not None:
            pins.append(apt.pin(name, full))
    held = " ".join(names)
    target = (
        " ".join(pins) if pins else f"{names[-1]}=<the {upstream} version that `apt-cache policy {names[-1]}` lists>"
    )
    return f"sudo apt-mark unhold {held}; sudo apt-get install --allow-downgrades {target}; sudo apt-mark hold {held}"
