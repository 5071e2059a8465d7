"""Issue 14 item 6: the secret values are an object held by the run, not process-wide state.

Two profiles resolved (and two runs made) in one process each mask their own values and only
those: nothing one run learns leaks into the other's masking, and nothing is left behind in a
module once a run is over.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.steptypes import TEST_TYPES
from workload import registry
from workload.cli.options import HostOpener
from workload.commands import MASK, Secret, Secrets, cmd, mask_text
from workload.engine import Engine, HostOutcome, RunOptions
from workload.errors import WorkloadError
from workload.hosts.base import Host, HostSpec, parse_host_spec
from workload.hosts.local import LocalHost
from workload.hosts.options import ConnectOptions
from workload.profile import ResolvedProfile, load_profile, resolve_profile
from workload.rundir import RunFolder

TOKEN_A = "tokA-1111-secret"
TOKEN_B = "tokB-2222-secret"


@pytest.fixture(autouse=True)
def _step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})


def _resolve(tmp_path: Path, name: str, token: str) -> ResolvedProfile:
    document = {
        "Description": f"run {name}",
        "Parameters": {"ApiToken": token},
        # the step says both values: each run must mask its own and only its own
        "Actions": [{"Type": "EchoStep", "Parameters": {"Message": f"{name} sees {TOKEN_A} and {TOKEN_B}"}}],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return resolve_profile(load_profile(str(path)))


def _local(spec: HostSpec) -> Host:
    return LocalHost(spec.name)


def _texts(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(root.rglob("*")) if p.is_file())


def test_two_resolved_profiles_mask_only_their_own_values(tmp_path: Path) -> None:
    a, b = _resolve(tmp_path, "a", TOKEN_A), _resolve(tmp_path, "b", TOKEN_B)
    text = f"{TOKEN_A} {TOKEN_B}"
    assert a.secrets.mask(text) == f"{MASK} {TOKEN_B}"
    assert b.secrets.mask(text) == f"{TOKEN_A} {MASK}"
    # resolving a profile filled no registry: text masked without a run's secrets keeps both
    assert mask_text(text) == text
    assert a.to_json()["Parameters"]["ApiToken"] == MASK and TOKEN_B in json.dumps(a.to_json())


def test_two_runs_in_one_process_at_once_keep_their_secrets_apart(tmp_path: Path) -> None:
    runs = {"a": _resolve(tmp_path, "a", TOKEN_A), "b": _resolve(tmp_path, "b", TOKEN_B)}
    outcomes: dict[str, list[HostOutcome]] = {}
    engines: dict[str, Engine] = {}

    def run(name: str) -> None:
        profile = runs[name]
        folder = RunFolder.create(tmp_path / name, profile.name)
        options = RunOptions(state_path=str(tmp_path / f"state-{name}.json"))
        engines[name] = Engine(profile, folder, _local, options)
        outcomes[name] = engines[name].run([parse_host_spec("local://")])

    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, own, other in (("a", TOKEN_A, TOKEN_B), ("b", TOKEN_B, TOKEN_A)):
        assert [o.status for o in outcomes[name]] == ["ok"]
        logs = _texts(tmp_path / name)
        assert f"{name} sees" in logs  # the step's command and its output were logged
        assert own not in logs  # masked in the step log and host.log
        assert other in logs  # the other run's value is not this run's secret: shown as it is
        record = json.dumps([o.to_json(engines[name].secrets) for o in outcomes[name]])
        assert own not in record
    assert mask_text(f"{TOKEN_A} {TOKEN_B}") == f"{TOKEN_A} {TOKEN_B}"  # nothing left in a module


def test_run_json_and_console_mask_a_failed_step_message_with_the_run_secrets() -> None:
    secrets = Secrets([TOKEN_A])
    outcome = HostOutcome(name="h", status="failed", error=WorkloadError(f"clone with token {TOKEN_A} failed"))
    assert TOKEN_A not in json.dumps(outcome.to_json(secrets))
    assert TOKEN_A in json.dumps(outcome.to_json())  # only the run knows the value
    assert cmd("git", "clone", f"--token={TOKEN_A}").display(secrets) == f"git clone '--token={MASK}'"


def test_connection_passwords_join_the_run_secrets_without_changing_the_profile(tmp_path: Path) -> None:
    profile = _resolve(tmp_path, "a", TOKEN_A)
    spec = parse_host_spec("ssh://u@10.0.0.9")
    spec.password = Secret("inventory-pw-123")
    opener = HostOpener(ConnectOptions(sudo_password=Secret("sudo-pw-456")), (spec,))
    run_secrets = profile.secrets.union(*opener.secrets)
    masked: Any = run_secrets.mask("inventory-pw-123 sudo-pw-456 " + TOKEN_A)
    assert masked == f"{MASK} {MASK} {MASK}"
    assert profile.secrets.mask("sudo-pw-456") == "sudo-pw-456"  # the profile's own set is unchanged
    assert Secrets(["abc"]).mask("abc") == "abc"  # too short to mask inside text (MIN_MASKED_LENGTH)
