"""Tests of the fresh-VM test bed itself (real dockerd, real sshd, real apt/dpkg in the VMs).

One VM (``driver_vm``) is shared by the driver / fabric manager / docker tests, which run in file
order and build on each other's state the way an installer run would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest

from tests.testbed.aptrepo import DRIVER_VERSIONS, UBUNTU_SUFFIX
from tests.testbed.dockerd import LABEL, OWNER_LABEL, DockerEngine, reap_orphans
from tests.testbed.fileserver import CudaRunfileServer
from tests.testbed.fixtures import *  # noqa: F403 - the fixtures under test
from tests.testbed.freshvm import FreshVM
from tests.testbed.image import IMAGE, RECIPE_LABEL, ensure_image

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OLD, NEW = DRIVER_VERSIONS
APT = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-y", "-q"]
GOLDEN = Path(__file__).parent / "testbed" / "golden" / "nvidia-smi-550.127.05-gh200.txt"


def ssh(vm: FreshVM, known_hosts: Path | None = None) -> paramiko.SSHClient:
    """A paramiko client with strict host key checking against the VM's known_hosts file."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts or vm.known_hosts_path))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        "127.0.0.1",
        port=vm.port,
        username=vm.user,
        key_filename=str(vm.key_path),
        look_for_keys=False,
        allow_agent=False,
        timeout=10,
    )
    return client


def run_ssh(client: paramiko.SSHClient, command: str) -> tuple[int, str]:
    _, stdout, stderr = client.exec_command(command, timeout=60)
    out = stdout.read().decode() + stderr.read().decode()
    return stdout.channel.recv_exit_status(), out


def pin(package: str, version: str) -> str:
    return f"{package}={version}{UBUNTU_SUFFIX}"


@pytest.fixture(scope="module")
def module_vm(docker_engine: DockerEngine, freshvm_image: str, standin_repo: Path) -> Iterator[FreshVM]:
    vm = FreshVM(docker_engine, freshvm_image, standin_repo, os_release="ubuntu-22.04").create()
    yield vm
    vm.remove()


@pytest.fixture(scope="module")
def driver_vm(module_vm: FreshVM) -> dict[str, Any]:
    """Install driver 550.127.05 pinned, observe the state before the reboot, then reboot."""
    vm = module_vm
    vm.check(["apt-get", "update", "-q"])
    pkgs = [pin(f"nvidia-{p}-550-server", OLD) for p in ("driver", "dkms", "utils")]
    install = vm.exec([*APT, "install", *pkgs])
    before = {
        "install": install,
        "smi": vm.exec(["nvidia-smi"]),
        "reboot_required": vm.exec(["cat", "/run/reboot-required"]),
        "dpkg": vm.exec(["dpkg-query", "-W", "-f=${Version}", "nvidia-driver-550-server"]),
    }
    vm.reboot()
    return {"vm": vm, "before": before}


def test_image_is_built_once_and_cached(docker_engine: DockerEngine, freshvm_image: str) -> None:
    image = docker_engine.client.images.get(freshvm_image)
    assert freshvm_image == IMAGE
    assert RECIPE_LABEL in image.labels
    assert ensure_image(docker_engine) == IMAGE
    # Not rebuilt: the same image (a build would give a new id). No time bound: ensure_image may wait
    # for another session's lock on a busy machine, which says nothing about the cache.
    assert docker_engine.client.images.get(IMAGE).id == image.id


def test_engine_is_private_and_answers(docker_engine: DockerEngine) -> None:
    assert docker_engine.base_url == f"unix://{docker_engine.socket_path}"
    assert docker_engine.client.ping()
    info = docker_engine.client.info()
    assert Path(info["DockerRootDir"]).parent == docker_engine.socket_path.parent


def test_an_exited_daemon_not_yet_reaped_is_not_alive(tmp_path: Path) -> None:
    """The session that started dockerd is its parent: once the daemon has shut down it is a zombie of that
    session until reaped, and the stop's wait read it as running (30 s at the end of every such session).
    A child of a child, never reaped by this process, is judged from /proc (state Z)."""
    from tests.testbed.dockerd import _pid_alive, process_state

    child = subprocess.Popen(["sleep", "0"])
    deadline = time.monotonic() + 10
    while process_state(child.pid) != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _pid_alive(child.pid)  # our own exited child (reaped by the check)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; p = subprocess.Popen(['sleep', '0']); "
            "print(p.pid, flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        grandchild = int(holder.stdout.readline())
        deadline = time.monotonic() + 10
        while process_state(grandchild) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not _pid_alive(grandchild)  # another process's zombie
        assert _pid_alive(holder.pid)  # a running process
    finally:
        holder.kill()
        holder.wait()


def test_orphan_reaping_survives_a_container_another_session_removes(
    docker_engine: DockerEngine, freshvm_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's engine must not fail when another session's test removes its container meanwhile.

    Seen in a 4-worker run: the listing named a container that was gone when it was inspected, and
    every test on that worker errored. Inspecting any container here fails the same way (a race no
    real daemon produces on demand); a dead owner's container is still reaped, a live one's kept.
    """
    import docker

    def gone(*args: object, **kwargs: object) -> None:
        raise docker.errors.NotFound("No such container (removed by another session)")

    dead = subprocess.Popen(["true"])
    dead.wait()
    made = {
        owner: docker_engine.client.containers.create(
            freshvm_image, ["true"], labels={LABEL: "1", OWNER_LABEL: str(owner)}
        ).id
        for owner in (dead.pid, os.getpid())
    }
    try:
        monkeypatch.setattr(docker_engine.client.api, "inspect_container", gone)
        reap_orphans(docker_engine)
        monkeypatch.undo()
        # the API's listing, not containers.list(): that inspects each listed container, and another worker's
        # container removed meanwhile failed this test the way the engine once failed (a red CI run)
        left = {c["Id"] for c in docker_engine.client.api.containers(all=True, filters={"label": LABEL})}
        assert made[dead.pid] not in left and made[os.getpid()] in left
    finally:
        monkeypatch.undo()
        for cid in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                docker_engine.client.api.remove_container(cid, force=True)


def test_ssh_key_auth_with_strict_host_key_checking(module_vm: FreshVM, tmp_path: Path) -> None:
    vm = module_vm
    assert vm.host_spec == f"ssh://root@127.0.0.1:{vm.port}"
    with ssh(vm) as client:
        code, out = run_ssh(client, "id -un; command -v sudo apt-get dpkg python3 wget curl")
    assert code == 0, out
    assert out.splitlines()[0] == "root"
    assert "/usr/bin/sudo" in out
    # Another host key under the same name must be refused: the check is real, not accept-all.
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, blob = other.with_suffix(".pub").read_text().split()[:2]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{vm.port} {kind} {blob}\n")
    with pytest.raises(paramiko.BadHostKeyException):
        ssh(vm, known_hosts=wrong)


def test_os_release_can_pretend_to_be_ubuntu(module_vm: FreshVM) -> None:
    code, out = module_vm.exec(["sh", "-c", ". /etc/os-release; echo $ID $VERSION_ID; lsb_release -cs"])
    assert code == 0
    assert out.split() == ["ubuntu", "22.04", "jammy"]


def test_apt_sees_only_the_standin_repo_with_two_driver_versions(module_vm: FreshVM) -> None:
    module_vm.check(["apt-get", "update", "-q"])
    out = module_vm.check(["apt-cache", "madison", "nvidia-driver-550-server"])
    assert f"{NEW}{UBUNTU_SUFFIX}" in out and f"{OLD}{UBUNTU_SUFFIX}" in out
    policy = module_vm.check(["apt-cache", "policy"])
    assert "deb.debian.org" not in policy
    assert "file:/srv/standin-repo" in policy


def test_pinned_driver_install_needs_a_reboot(driver_vm: dict[str, Any]) -> None:
    before = driver_vm["before"]
    code, out = before["install"]
    assert code == 0, out
    assert before["dpkg"] == (0, f"{OLD}{UBUNTU_SUFFIX}")
    assert before["reboot_required"][0] == 0
    code, out = before["smi"]
    assert code == 9
    assert "couldn't communicate with the NVIDIA driver" in out


def test_after_reboot_nvidia_smi_reports_the_driver(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    assert vm.exec(["test", "-e", "/run/reboot-required"])[0] == 1  # /run is fresh after a boot
    assert vm.loaded_driver() == OLD
    code, out = vm.exec(["nvidia-smi"])
    assert code == 0, out
    assert f"Driver Version: {OLD}" in out and "CUDA Version: 12.4" in out
    fields = "name,driver_version,memory.total,count,pci.bus_id,compute_cap,uuid"
    code, out = vm.exec(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    rows = [line.split(", ") for line in out.splitlines()]
    assert code == 0 and len(rows) == 8
    assert rows[0][:6] == ["NVIDIA H100 80GB HBM3", OLD, "81559", "8", "00000000:18:00.0", "9.0"]
    assert len({row[6] for row in rows}) == 8  # distinct UUIDs
    code, out = vm.exec(["nvidia-smi", "-L"])
    assert out.splitlines()[7].startswith("GPU 7: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_nvidia_smi_table_matches_a_real_550_output(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    gh200 = {
        "name": "NVIDIA GH200 480GB",
        "bus_id": "00000000:DD:00.0",
        "memory_mib": 97871,
        "memory_used_mib": 3,
        "power_w": 87,
        "power_cap_w": 700,
        "temp_c": 31,
        "compute_cap": "9.0",
        "uuid": "GPU-35d58415-1094-5ad1-64d1-b797587d33a7",
        "serial": "1654523007052",
    }
    vm.write_file("/var/lib/standin/hardware.json", json.dumps({"gpus": [gh200], "nvswitch": False}))
    try:
        code, out = vm.exec(["nvidia-smi"])
    finally:
        vm.set_gpus()
    assert code == 0
    assert out.splitlines()[1:] == GOLDEN.read_text().splitlines()


def test_fabric_manager_refuses_a_mismatched_driver(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    # The trap: the unpinned branch meta-package brings the newer fabric manager.
    vm.check([*APT, "install", "cuda-drivers-fabricmanager-550"])
    assert vm.check(["nv-fabricmanager", "--version"]).strip() == f"Fabric Manager version is : {NEW}"
    code, out = vm.exec(["systemctl", "start", "nvidia-fabricmanager"])
    assert code == 1
    assert "Job for nvidia-fabricmanager.service failed" in out
    journal = vm.check(["journalctl", "-u", "nvidia-fabricmanager", "--no-pager"])
    assert f"interface version {NEW} don't match with driver version {OLD}" in journal
    assert vm.exec(["systemctl", "is-active", "nvidia-fabricmanager"]) == (3, "failed\n")
    # Pinned to the driver's exact version it starts, and the GPUs join the fabric.
    vm.check(
        [
            *APT,
            "install",
            "--allow-downgrades",
            f"cuda-drivers-fabricmanager-550={OLD}-1",
            f"nvidia-fabricmanager-550={OLD}-1",
        ]
    )
    assert vm.exec(["systemctl", "start", "nvidia-fabricmanager"])[0] == 0
    assert vm.exec(["systemctl", "is-active", "nvidia-fabricmanager"]) == (0, "active\n")
    query = vm.check(["nvidia-smi", "-q"])
    assert "State                             : Completed" in query
    assert "26.562 GB/s" in vm.check(["nvidia-smi", "nvlink", "-s"])
    # Enabled units start at boot, like systemd.
    vm.reboot()
    assert vm.exec(["systemctl", "is-active", "nvidia-fabricmanager"]) == (0, "active\n")


def test_fabric_manager_fails_without_nvswitch(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    vm.check(["systemctl", "stop", "nvidia-fabricmanager"])
    vm.set_gpus(name="NVIDIA H100 PCIe", count=2, nvswitch=False)
    try:
        assert vm.exec(["systemctl", "start", "nvidia-fabricmanager"])[0] == 1
        assert "NV_WARN_NOTHING_TO_DO" in vm.check(["journalctl", "-u", "nvidia-fabricmanager"])
    finally:
        vm.set_gpus()


def test_docker_sees_gpus_only_after_toolkit_configure_and_restart(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    vm.check(
        [
            *APT,
            "install",
            "docker-ce",
            "docker-ce-cli",
            "containerd.io",
            "docker-compose-plugin",
            "nvidia-container-toolkit",
        ]
    )
    assert vm.exec(["systemctl", "is-active", "docker"]) == (0, "active\n")
    gpu_run = ["docker", "run", "--rm", "--gpus", "all", "ubuntu", "nvidia-smi", "-L"]
    code, out = vm.exec(gpu_run)
    assert code == 125 and 'could not select device driver "" with capabilities: [[gpu]]' in out
    out = vm.check(["nvidia-ctk", "runtime", "configure", "--runtime=docker"])
    daemon_json = json.loads(vm.read_file("/etc/docker/daemon.json"))
    assert daemon_json["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert vm.exec(gpu_run)[0] == 125  # the running daemon has not re-read its config
    vm.check(["systemctl", "restart", "docker"])
    runtimes = json.loads(vm.check(["docker", "info", "--format", "{{json .Runtimes}}"]))
    assert {"runc", "nvidia"} <= set(runtimes)
    code, out = vm.exec(gpu_run)
    assert code == 0 and len(out.splitlines()) == 8
    assert vm.check(["docker", "version", "--format", "{{.Server.Version}}"]).strip() == "27.3.1"


def test_driver_upgrade_without_reboot_is_a_version_mismatch(driver_vm: dict[str, Any]) -> None:
    vm: FreshVM = driver_vm["vm"]
    vm.check([*APT, "install", *(pin(f"nvidia-{p}-550-server", NEW) for p in ("driver", "dkms", "utils"))])
    code, out = vm.exec(["nvidia-smi"])
    assert code == 18
    assert "Failed to initialize NVML: Driver/library version mismatch" in out
    vm.reboot()
    assert vm.loaded_driver() == NEW


SLEEPER_UNIT = """\
[Unit]
Description=Stand-in test sleeper
# a comment = not a key

[Service]
Type=notify
ExecStartPre=-/bin/echo pre-step ran
ExecStart=/bin/sleep 600
ExecStop=/bin/echo stopping now

[Install]
WantedBy=multi-user.target
"""
CRASHER_UNIT = """\
[Service]
ExecStart=/usr/local/bin/crasher --fast
"""
CRASHER = '#!/bin/sh\necho "boom: $1" >&2\nexit 7\n'


def test_standin_systemctl_follows_systemd_for_the_verbs_installers_use(module_vm: FreshVM) -> None:
    vm = module_vm
    vm.write_file("/etc/systemd/system/tb-sleeper.service", SLEEPER_UNIT)
    vm.write_file("/etc/systemd/system/tb-crasher.service", CRASHER_UNIT)
    vm.write_file("/usr/local/bin/crasher", CRASHER, mode=0o755)
    link = "/etc/systemd/system/multi-user.target.wants/tb-sleeper.service"

    assert vm.exec(["systemctl", "is-enabled", "tb-sleeper"]) == (1, "disabled\n")
    assert vm.exec(["systemctl", "enable", "tb-sleeper"]) == (
        0,
        f"Created symlink {link} \u2192 /etc/systemd/system/tb-sleeper.service.\n",
    )
    assert vm.exec(["systemctl", "enable", "tb-sleeper"]) == (0, "")  # already enabled: quiet
    assert vm.exec(["systemctl", "is-enabled", "--quiet", "tb-sleeper.service"]) == (0, "")

    # A long-running main process: start returns once it survived its start-up, and is tracked.
    started = time.monotonic()
    assert vm.exec(["systemctl", "start", "tb-sleeper"]) == (0, "")
    assert time.monotonic() - started >= 0.5
    assert vm.exec(["systemctl", "is-active", "tb-sleeper"]) == (0, "active\n")
    code, status = vm.exec(["systemctl", "status", "tb-sleeper"])
    assert code == 0
    lines = status.splitlines()
    assert lines[0] == "\u25cf tb-sleeper.service - Stand-in test sleeper"
    assert lines[1] == "     Loaded: loaded (/etc/systemd/system/tb-sleeper.service; enabled; preset: enabled)"
    assert lines[2].startswith("     Active: active (running) since ") and lines[2].endswith(" UTC")
    pid = int(lines[3].split()[2])
    assert lines[3] == f"   Main PID: {pid} (sleep)"
    assert vm.check(["cat", f"/proc/{pid}/comm"]).strip() == "sleep"
    assert "]: pre-step ran" in status and "systemd[1]: Started Stand-in test sleeper." in status

    # The main process dies behind systemd's back: the unit is failed, and restart revives it.
    vm.check(["kill", "-KILL", str(pid)])
    deadline = time.monotonic() + 5
    while vm.exec(["systemctl", "is-active", "tb-sleeper"]) != (3, "failed\n"):
        assert time.monotonic() < deadline, "the killed main process was not noticed"
        time.sleep(0.1)
    assert vm.exec(["systemctl", "is-failed", "tb-sleeper"]) == (0, "failed\n")
    vm.check(["systemctl", "restart", "tb-sleeper"])
    new_pid = int(vm.check(["systemctl", "status", "tb-sleeper"]).splitlines()[3].split()[2])
    assert new_pid != pid
    assert vm.exec(["systemctl", "stop", "tb-sleeper"]) == (0, "")
    assert vm.exec(["systemctl", "is-active", "tb-sleeper"]) == (3, "inactive\n")
    assert vm.exec(["test", "-e", f"/proc/{new_pid}/comm"])[0] != 0  # TERM reached it
    journal = vm.check(["journalctl", "-u", "tb-sleeper"])
    assert "]: stopping now" in journal and "systemd[1]: Stopped Stand-in test sleeper." in journal
    assert vm.exec(["systemctl", "try-restart", "tb-sleeper"]) == (0, "")  # not running: left alone
    assert vm.exec(["systemctl", "is-active", "tb-sleeper"])[0] == 3

    # A main process that exits at once: the "Job failed" text, the details only in the journal.
    code, out = vm.exec(["systemctl", "start", "tb-crasher"])
    assert (code, out) == (
        1,
        "Job for tb-crasher.service failed because the service process exited with error code.\n"
        'See "systemctl status tb-crasher.service" and "journalctl -xeu tb-crasher.service" for details.\n',
    )
    journal = vm.check(["journalctl", "-xeu", "tb-crasher"])
    assert "crasher[" in journal and "]: boom: --fast" in journal
    assert "tb-crasher.service: Main process exited, code=exited, status=7/FAILURE" in journal
    assert "systemd[1]: Failed to start tb-crasher.service." in journal  # no Description: the name
    code, status = vm.exec(["systemctl", "status", "tb-crasher"])
    assert code == 3 and status.startswith("\u00d7 tb-crasher.service - tb-crasher.service\n")
    assert "     Active: failed (Result: exit-code) since " in status

    assert vm.exec(["systemctl", "disable", "tb-sleeper"]) == (0, f'Removed "{link}".\n')
    assert vm.exec(["systemctl", "is-enabled", "tb-sleeper"]) == (1, "disabled\n")
    # Unknown units and verbs: systemd's messages and exit codes.
    assert vm.exec(["systemctl", "is-active", "tb-none"]) == (3, "inactive\n")
    assert vm.exec(["systemctl", "status", "tb-none"]) == (4, "Unit tb-none.service could not be found.\n")
    assert vm.exec(["systemctl", "start", "tb-none"]) == (
        5,
        "Failed to start tb-none.service: Unit tb-none.service not found.\n",
    )
    assert vm.exec(["systemctl", "frobnicate", "tb-sleeper"]) == (1, "Unknown command verb frobnicate.\n")
    assert vm.exec(["systemctl", "daemon-reload"]) == (0, "")


def test_dpkg_lock_holder_blocks_apt(module_vm: FreshVM) -> None:
    vm = module_vm
    pid = vm.hold_dpkg_lock(60)
    try:
        assert vm.check(["cat", f"/proc/{pid}/comm"]).strip() == "unattended-upgr"
        started = time.monotonic()
        code, out = vm.exec([*APT, "-o", "DPkg::Lock::Timeout=0", "install", "dkms"])
        assert time.monotonic() - started < 60  # failed at once, not after the holder's 60 s
        assert code == 100
        assert "Could not get lock /var/lib/dpkg/lock-frontend" in out
        assert f"held by process {pid} (unattended-upgr)" in out
    finally:
        vm.exec(["kill", str(pid)])


def test_runfile_download_resumes_after_a_cut(module_vm: FreshVM, cuda_runfile_server: CudaRunfileServer) -> None:
    vm, server = module_vm, cuda_runfile_server
    assert server.url.endswith("/compute/cuda/12.4.0/local_installers/cuda_12.4.0_550.54.14_linux.run")
    assert server.size > 2_000_000
    server.cut_next_download(1_000_000)
    target = "/root/cuda_12.4.0_550.54.14_linux.run"
    code, _ = vm.exec(["curl", "-fsS", "-o", target, server.url])
    assert code == 18  # "partial file": the real curl saw the connection drop
    assert vm.check(["stat", "-c", "%s", target]).strip() == "1000000"
    code, out = vm.exec(["sh", target, "--silent", "--toolkit"])
    assert code == 1 and "corrupt" in out  # a truncated installer refuses to run
    vm.check(["curl", "-fsS", "-C", "-", "-o", target, server.url])
    assert server.requests[-1].range == "bytes=1000000-" and server.requests[-1].status == 206
    assert vm.check(["sha256sum", target]).split()[0] == server.sha256
    vm.check(["sh", target, "--silent", "--toolkit"])
    assert "Cuda compilation tools, release 12.4, V12.4.99" in vm.check(["/usr/local/cuda-12.4/bin/nvcc", "--version"])


def test_runfile_server_range_edge_cases(cuda_runfile_server: CudaRunfileServer) -> None:
    server = cuda_runfile_server
    request = urllib.request.Request(server.url, headers={"Range": "bytes=-100"})
    with urllib.request.urlopen(request) as resp:
        tail = resp.read()
    assert resp.status == 206 and tail == server.path.read_bytes()[-100:]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(server.url, headers={"Range": f"bytes={server.size}-"}))
    assert err.value.code == 416
    with urllib.request.urlopen(server.url) as resp:
        assert hashlib.sha256(resp.read()).hexdigest() == server.sha256


def test_normal_user_with_sudo_and_reboot_from_inside(fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm(user="azureuser", gpus=0)
    assert vm.host_spec == f"ssh://azureuser@127.0.0.1:{vm.port}"
    boots = vm.boot_count()
    with ssh(vm) as client:
        code, out = run_ssh(client, "id -un; sudo -n id -un; touch /home/azureuser/kept")
        assert code == 0, out
        assert out.split() == ["azureuser", "root"]
        assert run_ssh(client, "nvidia-smi")[0] == 127  # no driver package yet
        code, _ = run_ssh(client, "sudo shutdown -r now")
        assert code == 0
    vm.wait_rebooted(boots)
    assert vm.exec(["test", "-e", "/home/azureuser/kept"])[0] == 0  # the disk survived


def test_stop_and_start_sshd(fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm()
    vm.stop_sshd()
    assert vm.status() == "running"
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        ssh(vm)
    vm.start_sshd()
    with ssh(vm) as client:
        assert run_ssh(client, "true")[0] == 0


def test_fleet_of_vms_in_parallel(fresh_vms: Callable[..., list[FreshVM]]) -> None:
    vms = fresh_vms(3)
    # In parallel: every VM's start began before any VM's sshd answered (one after another, the
    # second would begin only once the first answered), however fast this machine boots them.
    began, answered = [vm.create_began for vm in vms], [vm.answered_at for vm in vms]
    assert all(began) and all(answered) and max(began) < min(answered), (began, answered)
    assert len({vm.port for vm in vms}) == 3
    for vm in vms:
        with ssh(vm) as client:
            assert run_ssh(client, "cat /var/lib/standin/boot-count")[1].strip() == "1"
