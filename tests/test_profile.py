"""Profile loading, reference resolution and validation: good profiles load, bad ones say where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.steptypes import TEST_TYPES
from workload import registry
from workload.errors import ProfileError
from workload.params import parse_parameters
from workload.profile import load_profile, resolve_profile

FIXTURES = Path(__file__).parent / "fixtures" / "profiles"


@pytest.fixture(autouse=True)
def test_step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})


def write(tmp_path: Path, content: Any, name: str = "p.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def good_profile(**overrides: Any) -> dict[str, Any]:
    profile: dict[str, Any] = {
        "Description": "test",
        "Parameters": {"Greeting": "hi", "Times": 2},
        "Dependencies": [{"Type": "EchoStep", "Parameters": {"Scenario": "Dep", "Message": "$.Parameters.Greeting"}}],
        "Actions": [
            {"Type": "EchoStep", "Parameters": {"Scenario": "A1", "Count": "$.Parameters.Times"}},
            {"Type": "echostep", "Parameters": {"scenario": "A2", "MESSAGE": "loud"}},
        ],
    }
    profile.update(overrides)
    return profile


def test_good_profile_resolves_references_case_insensitively(tmp_path: Path) -> None:
    resolved = resolve_profile(load_profile(write(tmp_path, good_profile())))
    dep, a1, a2 = resolved.steps
    assert dep.kind == "dependency" and dep.params.Message == "hi"  # type: ignore[attr-defined]
    assert a1.params.Count == 2  # type: ignore[attr-defined]
    assert a2.type_name == "EchoStep" and a2.params.Message == "loud" and a2.params.Scenario == "A2"  # type: ignore[attr-defined]


def test_overrides_replace_global_parameters_case_insensitively(tmp_path: Path) -> None:
    overrides = parse_parameters(["greeting=hello,,,TIMES=3"])
    resolved = resolve_profile(load_profile(write(tmp_path, good_profile())), overrides)
    assert resolved.steps[0].params.Message == "hello"  # type: ignore[attr-defined]
    assert resolved.steps[1].params.Count == 3  # type: ignore[attr-defined]
    assert resolved.parameters["Greeting"] == "hello"


def test_scenario_filter_includes_and_excludes(tmp_path: Path) -> None:
    loaded = load_profile(write(tmp_path, good_profile()))
    only_a2 = resolve_profile(loaded, scenarios=["A2"])
    assert [s.params.Scenario for s in only_a2.steps] == ["Dep", "A2"]
    no_dep = resolve_profile(loaded, scenarios=["-dep", "-a1"])
    assert [s.params.Scenario for s in no_dep.steps] == ["A2"]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["A=1,B=2"], {"A": "1", "B": "2"}),
        (["A=1;B=x,y"], {"A": "1", "B": "x,y"}),
        (["A=1,,,B=x;y,z"], {"A": "1", "B": "x;y,z"}),
        (["DiskFilter=SizeGreaterThan:500gb&OSDisk:false"], {"DiskFilter": "SizeGreaterThan:500gb&OSDisk:false"}),
        (["Url=https://h/x?a=b"], {"Url": "https://h/x?a=b"}),
        (["a=1", "A=2"], {"a": "2"}),
    ],
)
def test_parameters_follow_virtualclient_delimiters(texts: list[str], expected: dict[str, str]) -> None:
    assert parse_parameters(texts) == expected


def test_parameters_without_equals_are_rejected() -> None:
    from workload.errors import UsageError

    with pytest.raises(UsageError, match=r"item 2 \(after the value of 'A'\) is not key=value"):
        parse_parameters(["A=1,oops"])


MALFORMED: list[tuple[str, Any, str]] = [
    ("empty file", "", "the file is empty"),
    ("whitespace only", "  \n ", "the file is empty"),
    ("invalid json", '{"Description": "x",', "line 1 column 21: invalid JSON"),
    ("trailing comma", '{"Description": "x",}', "invalid JSON"),
    ("top level array", "[]", "the top level must be a JSON object, not an array"),
    ("top level string", '"x"', "not a string"),
    ("missing description", {"Actions": []}, "Description: required field is missing"),
    ("unknown top key", {"Description": "x", "Dependancies": []}, "Dependancies: unknown key"),
    ("actions not a list", {"Description": "x", "Actions": {}}, "Actions: Input should be a valid list"),
    ("missing type", {"Description": "x", "Actions": [{"Parameters": {}}]}, "Actions[0].Type: required field"),
    ("empty type", {"Description": "x", "Actions": [{"Type": ""}]}, "Actions[0].Type: String should have at least"),
    (
        "type not string",
        {"Description": "x", "Actions": [{"Type": 5}]},
        "Actions[0].Type: Input should be a valid string",
    ),
    ("unknown type", {"Description": "x", "Actions": [{"Type": "Nope"}]}, "Actions[0].Type: unknown step type 'Nope'"),
    (
        "unknown type in dependencies",
        {"Description": "x", "Dependencies": [{"Type": "EchoStep"}, {"Type": "Bogus"}]},
        "Dependencies[1].Type: unknown step type 'Bogus'",
    ),
    (
        "parameters not an object",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": []}]},
        "Actions[0].Parameters: Input should be a valid dictionary",
    ),
    (
        "unresolved reference",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters.Missing"}}]},
        "Actions[0].Parameters.Message: unresolved reference '$.Parameters.Missing'",
    ),
    (
        "malformed reference",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters.a b"}}]},
        "Actions[0].Parameters.Message: malformed parameter reference",
    ),
    (
        "empty reference",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters."}}]},
        "malformed parameter reference",
    ),
    (
        "wrong value type",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Count": "many"}}]},
        "Actions[0].Parameters.Count: Input should be a valid integer",
    ),
    (
        "out of range",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Count": 99}}]},
        "Actions[0].Parameters.Count: Input should be less than or equal to 10",
    ),
    (
        "wrong type via reference",
        {
            "Description": "x",
            "Parameters": {"N": "lots"},
            "Actions": [{"Type": "EchoStep", "Parameters": {"Count": "$.Parameters.N"}}],
        },
        "Actions[0].Parameters.Count: Input should be a valid integer",
    ),
    (
        "object parameter value",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Message": {"a": 1}}}]},
        "Actions[0].Parameters.Message: must be a string, number or boolean, not",
    ),
    (
        "global parameter is a list",
        {"Description": "x", "Parameters": {"L": [1]}},
        "Parameters.L",
    ),
    (
        "duplicate parameter names ignoring case",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Count": 1, "count": 2}}]},
        "Actions[0].Parameters.count: parameter given twice",
    ),
    (
        "step-specific check",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "forbidden"}}]},
        "Actions[0].Parameters.Message: unknown message 'forbidden'",
    ),
    (
        "components unsupported",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Components": [{"Type": "EchoStep"}]}]},
        "Actions[0].Components: composite components",
    ),
    (
        "parameters on unsupported",
        {"Description": "x", "ParametersOn": [{"Condition": "x"}]},
        "ParametersOn: conditional parameters are not supported",
    ),
    ("monitor type unknown", {"Description": "x", "Monitors": [{"Type": "PerfCounter"}]}, "unknown step type"),
    (
        "number too large",
        '{"Description": "x", "Parameters": {"A": 1e999}}',
        "bad.json: Parameters.A: '1e999' is not a finite",
    ),
    (
        "NaN in a step",
        '{"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Count": NaN}}]}',
        "Actions[0].Parameters.Count: 'NaN' is not a finite number",
    ),
    (
        "misspelled parameter",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"Mesage": "hi"}}]},
        "Actions[0].Parameters.Mesage: unknown parameter (did you mean 'Message'?) for EchoStep",
    ),
    (
        "unknown parameter",
        {"Description": "x", "Dependencies": [{"Type": "EchoStep", "Parameters": {"Frobnicate": 1}}]},
        "Dependencies[0].Parameters.Frobnicate: unknown parameter for EchoStep",
    ),
    (
        "unknown parameter with an odd name",
        {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {"a.b": 1}}]},
        'Actions[0].Parameters["a.b"]: unknown parameter for EchoStep',
    ),
    (
        "action under Dependencies",
        {"Description": "x", "Dependencies": [{"Type": "MLPerfExecutor", "Parameters": {"Model": "bert"}}]},
        "Dependencies[0].Type: MLPerfExecutor is an action: it belongs under Actions, not Dependencies",
    ),
    (
        "dependency under Actions",
        {"Description": "x", "Actions": [{"Type": "formatdisks"}]},
        "Actions[0].Type: FormatDisks is a dependency: it belongs under Dependencies, not Actions",
    ),
    (
        "misspelled driver parameter",
        {
            "Description": "x",
            "Dependencies": [
                {
                    "Type": "NvidiaCudaInstallation",
                    "Parameters": {"LinuxDriverVersion": "550", "LinuxDriverVerison": "535"},
                }
            ],
        },
        "Dependencies[0].Parameters.LinuxDriverVerison: unknown parameter (did you mean 'LinuxDriverVersion'?)",
    ),
    (
        "bad dotted LoadGen override",
        {
            "Description": "x",
            "Actions": [{"Type": "MLPerfExecutor", "Parameters": {"Model": "bert", "bert.Server.target_qps": "fast"}}],
        },
        "Actions[0].Parameters[\"bert.Server.target_qps\"]: value 'fast' is not",
    ),
]


@pytest.mark.parametrize(("case", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_profiles_give_one_located_error(tmp_path: Path, case: str, content: Any, message: str) -> None:
    path = write(tmp_path, content, name="bad.json")
    with pytest.raises(ProfileError) as info:
        resolve_profile(load_profile(path))
    text = str(info.value)
    assert text.startswith("bad.json"), text
    assert message in text, text
    assert "Traceback" not in text


def test_virtualclient_generic_parameters_are_accepted_on_every_step(tmp_path: Path) -> None:
    generic = {
        "Scenario": "S",
        "MetricScenario": "M",
        "Tags": "a,b",
        "MetricFilters": "verbosity:1",
        "LogToFile": True,
        "PackageName": "x",
        "SupportedPlatforms": "linux-x64",
        "ProfilingEnabled": False,
        "FailFast": True,
    }
    profile = {"Description": "x", "Actions": [{"Type": "EchoStep", "Parameters": {**generic, "message": "hi"}}]}
    (step,) = resolve_profile(load_profile(write(tmp_path, profile))).steps
    assert step.params.Message == "hi" and step.params.FailFast is True  # type: ignore[attr-defined]
    # LoadGen overrides named like the key are the MLPerf executor's own family of parameters.
    mlperf = {"Type": "MLPerfExecutor", "Parameters": {"Model": "bert", "bert.Server.target_qps": "120"}}
    (step,) = resolve_profile(load_profile(write(tmp_path, {"Description": "x", "Actions": [mlperf]}))).steps
    assert step.params.model_extra == {"bert.Server.target_qps": "120"}


def test_secret_parameters_are_masked_in_the_resolved_profile(tmp_path: Path) -> None:
    from workload.commands import mask_text
    from workload.params import is_secret

    profile = {
        "Description": "x",
        "Parameters": {"HfToken": "hf_abcdef123", "RepoKey": "https://x.invalid/key.gpg", "MaxTokens": "1024"},
        "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "https://u:pw-in-url-77@h.invalid/r"}}],
    }
    resolved = resolve_profile(load_profile(write(tmp_path, profile)))
    saved = resolved.to_json()
    assert saved["Parameters"] == {"HfToken": "***", "RepoKey": "https://x.invalid/key.gpg", "MaxTokens": "1024"}
    assert saved["Actions"][0]["Parameters"]["Message"] == "https://u:***@h.invalid/r"
    assert resolved.steps[0].params.Message == "https://u:pw-in-url-77@h.invalid/r"  # type: ignore[attr-defined]
    # The resolved profile holds the values: any later text the run shows with them masks them.
    assert resolved.secrets.mask("token hf_abcdef123 and pw-in-url-77") == "token *** and ***"
    assert mask_text("token hf_abcdef123") == "token hf_abcdef123"  # no process-wide registry
    assert [is_secret(n, "v-123") for n in ("SshPassword", "api_key", "GitHubPAT", "Keyboard", "ClientSecret")] == [
        True,
        True,
        False,
        False,
        True,
    ]


def test_missing_profile_lists_shipped_ones() -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("NO-SUCH-PROFILE")
    assert "no such shipped profile" in str(info.value)
    assert "PERF-GPU-MLPERF" in str(info.value)


def test_missing_path_says_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no such file"):
        load_profile(str(tmp_path / "missing.json"))


def test_shipped_names_match_with_or_without_json_and_any_case() -> None:
    assert load_profile("PERF-GPU-MLPERF").name == "PERF-GPU-MLPERF"
    assert load_profile("perf-gpu-mlperf.json").name == "PERF-GPU-MLPERF"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
element = st.fixed_dictionaries(
    {},
    optional={
        "Type": st.sampled_from(["EchoStep", "FailStep", "Nope", "", 3]) | json_values,
        "Parameters": st.dictionaries(
            st.sampled_from(["Message", "Count", "Scenario", "Marker", "x"]),
            st.sampled_from(["$.Parameters.Greeting", "$.Parameters.missing", "$.Parameters.", 0, 11, "s"])
            | json_values,
            max_size=3,
        )
        | json_values,
        "Components": st.lists(st.just({"Type": "EchoStep"}), max_size=1),
    },
)
profiles = st.fixed_dictionaries(
    {},
    optional={
        "Description": st.text(max_size=5) | json_values,
        "Parameters": st.dictionaries(st.sampled_from(["Greeting", "Times"]), json_values, max_size=2),
        "Actions": st.lists(element, max_size=3) | json_values,
        "Dependencies": st.lists(element, max_size=2),
        "Extra": json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=profiles | json_values)
def test_fuzzed_profiles_never_raise_anything_but_profile_error(tmp_path: Path, document: Any) -> None:
    path = write(tmp_path, document, name="fuzz.json")
    try:
        resolve_profile(load_profile(path))
    except ProfileError as exc:
        assert str(exc).startswith("fuzz.json"), str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=60))
def test_fuzzed_text_never_raises_anything_but_profile_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text, name="fuzz.json")
    try:
        resolve_profile(load_profile(path))
    except ProfileError as exc:
        assert str(exc).startswith("fuzz.json"), str(exc)
