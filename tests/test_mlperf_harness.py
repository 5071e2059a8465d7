"""Pure tests: RUN_ARGS, make argv, user.conf, parameters, the gpuconfigs table, result mapping, plan text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload.actions.mlperf_executor import (
    MLPerfExecutor,
    MLPerfFacts,
    MLPerfParameters,
    UserFacts,
    build_key,
    plan_mlperf,
    settings_of,
    setup_key,
)
from workload.errors import ProfileError
from workload.mlperf import results
from workload.mlperf.container import ContainerSpec, container_name, run_options
from workload.mlperf.gpuconfigs import gpu_count_problem, load_table
from workload.mlperf.harness import (
    HarnessVersion,
    RunGroup,
    log_dir,
    make_argv,
    parse_override,
    parse_override_list,
    run_args,
    run_groups,
    scenario_fields,
)
from workload.mlperf.rounds.v4_1 import V4_1Round
from workload.profile import load_profile, resolve_profile


def params(**kw: object) -> MLPerfParameters:
    data = {"Model": "bert", **kw}
    p = MLPerfParameters.model_validate(data)
    MLPerfExecutor.check_parameters(p)
    return p


# -- RUN_ARGS ----------------------------------------------------------------------------------
def test_run_args_v41_quick_uses_test_run() -> None:
    args = run_args(
        model="bert",
        scenarios=["Offline", "Server"],
        config_version="default",
        test_mode="PerformanceOnly",
        quick_flag=V4_1Round().quick_flag(HarnessVersion.parse("v4.1\n")),
    )
    assert (
        args
        == "--benchmarks=bert --scenarios=Offline,Server --config_ver=default --test_mode=PerformanceOnly --test_run"
    )


def test_run_args_v40_quick_uses_fast_and_full_runs_use_neither() -> None:
    v40 = HarnessVersion.parse("v4.0")
    assert run_args(
        model="3d-unet",
        scenarios=["Offline"],
        config_version="default",
        test_mode="AccuracyOnly",
        quick_flag=V4_1Round().quick_flag(v40),
    ).endswith("--test_mode=AccuracyOnly --fast")
    full = run_args(
        model="bert",
        scenarios=["Offline"],
        config_version="high_accuracy",
        test_mode="PerformanceOnly",
    )
    assert "--test_run" not in full and "--fast" not in full and "--config_ver=high_accuracy" in full


@pytest.mark.parametrize("text", ["", "4", "version 4.1", "v4.x"])
def test_bad_version_file_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not a harness version"):
        HarnessVersion.parse(text)


def test_make_argv_keeps_run_args_one_argument() -> None:
    argv = make_argv(
        "run", {"RUN_ARGS": "--benchmarks=bert --scenarios=Offline", "LOG_DIR": log_dir("r1", "bert", "AccuracyOnly")}
    )
    assert argv == [
        "make",
        "run",
        "RUN_ARGS=--benchmarks=bert --scenarios=Offline",
        "LOG_DIR=build/logs/workload-r1-bert-acc",
    ]


# -- LoadGen overrides as RUN_ARGS fields --------------------------------------------------------
def test_each_supported_key_becomes_the_harness_field_in_its_unit() -> None:
    overrides = parse_override_list(
        ";".join(
            [
                "bert.Offline.target_qps=30000",
                "bert.Server.target_qps=24750.5",
                "bert.SingleStream.target_latency=1.7",  # ms in LoadGen, ns in the harness field
                "bert.Server.target_latency=130",
                "bert.Server.target_latency_percentile=99",
                "bert.SingleStream.target_latency_percentile=90",
                "*.*.min_query_count=0x10",
                "*.*.max_duration=900000",
                "*.*.performance_sample_count_override=10833",
            ]
        )
    )
    assert scenario_fields("bert", "Offline", overrides) == {
        "offline_expected_qps": "30000",
        "min_query_count": "16",
        "max_duration": "900000",
        "performance_sample_count_override": "10833",
    }
    server = scenario_fields("bert", "Server", overrides)
    assert server["server_target_qps"] == "24750.5"
    assert server["server_target_latency_ns"] == "130000000"
    assert server["server_target_latency_percentile"] == "99"
    single = scenario_fields("bert", "SingleStream", overrides)
    assert single["single_stream_expected_latency_ns"] == "1700000"
    assert single["single_stream_target_latency_percentile"] == "90"
    multi = scenario_fields(
        "resnet50",
        "MultiStream",
        parse_override_list("*.MultiStream.samples_per_query=8;*.MultiStream.target_latency=80"),
    )
    assert multi == {"multi_stream_samples_per_query": "8", "multi_stream_expected_latency_ns": "80000000"}


def test_overrides_for_another_model_are_ignored_and_the_most_specific_wins() -> None:
    overrides = parse_override_list(
        "3d-unet.Offline.min_duration=1000;*.*.min_duration=2000;bert.*.min_duration=3000;"
        "*.Offline.min_duration=4000;bert.Offline.min_duration=5000"
    )
    assert scenario_fields("bert", "Offline", overrides) == {"min_duration": "5000"}  # model.Scenario
    assert scenario_fields("bert", "Server", overrides) == {"min_duration": "3000"}  # model.* over *.*
    assert scenario_fields("3d-unet", "Offline", overrides) == {"min_duration": "1000"}
    assert scenario_fields("3d-unet", "SingleStream", overrides) == {"min_duration": "2000"}
    assert scenario_fields("resnet50", "Offline", overrides) == {"min_duration": "4000"}  # *.Offline over *.*


def test_a_shared_field_for_one_scenario_splits_the_run_and_scenario_fields_do_not() -> None:
    scenarios = ("Offline", "Server", "SingleStream")
    overrides = parse_override_list("bert.Offline.min_duration=30000;bert.Server.target_qps=5000")
    # --min_duration would reach every scenario of a make run: Offline runs alone.
    assert run_groups("bert", scenarios, overrides) == [
        RunGroup(("Offline",), (("min_duration", "30000"),)),
        RunGroup(("Server", "SingleStream"), (("server_target_qps", "5000"),)),
    ]
    # Scenario fields are read only by their scenario; a shared field for all keeps one run.
    together = parse_override_list("bert.Server.target_qps=5000;bert.Offline.target_qps=9000;*.*.min_duration=1")
    assert run_groups("bert", scenarios, together) == [
        RunGroup(
            scenarios,
            (("offline_expected_qps", "9000"), ("server_target_qps", "5000"), ("min_duration", "1")),
        )
    ]
    assert run_groups("bert", scenarios, []) == [RunGroup(scenarios, ())]
    assert run_groups("3d-unet", ("Offline",), overrides) == [RunGroup(("Offline",), ())]


def test_run_args_carry_the_fields_and_never_a_user_conf() -> None:
    (group,) = run_groups("bert", ["Server"], parse_override_list("bert.Server.target_qps=5000"))
    args = run_args(
        model="bert",
        scenarios=group.scenarios,
        config_version="default",
        test_mode="PerformanceOnly",
        quick_flag=V4_1Round().quick_flag(HarnessVersion(4, 1)),
        fields=group.fields,
    )
    assert args == (
        "--benchmarks=bert --scenarios=Server --config_ver=default --test_mode=PerformanceOnly "
        "--test_run --server_target_qps=5000"
    )
    assert "user_conf" not in args


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("bert.Server.target_qsp", "1", "cannot take 'target_qsp'"),
        ("bert.Server.schedule_rng_seed", "1", "cannot take 'schedule_rng_seed'"),
        ("rnnt.Server.target_qps", "1", "unknown model 'rnnt'"),
        ("bert.Batch.target_qps", "1", "unknown scenario 'Batch'"),
        ("bert.SingleStream.target_qps", "1", "applies only to Offline, Server"),
        ("bert.Offline.samples_per_query", "8", "applies only to MultiStream"),
        ("bert.Server.target_qps", "fast", "not an integer or a decimal number"),
        ("bert.Server.target_qps", "0", "must be greater than 0"),
        ("bert.Offline.min_duration", "1.5", "whole number"),
        ("bert.Server.target_latency_percentile", "0.99e3", "at most 100"),
        ("bert.target_qps", "1", "<model>.<Scenario>.<key>"),
    ],
)
def test_bad_overrides_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_override(key, value)
    assert str(err.value).startswith(key)


def test_a_refused_key_lists_the_supported_ones() -> None:
    with pytest.raises(ValueError) as err:
        params(**{"bert.*.qsl_rng_seed": 7})
    text = str(err.value)
    assert "bert.*.qsl_rng_seed: NVIDIA's harness cannot take 'qsl_rng_seed'" in text
    for key in ("target_qps (Offline, Server)", "target_latency (SingleStream, MultiStream, Server)", "min_duration"):
        assert key in text


def test_per_key_parameters_become_overrides() -> None:
    p = params(**{"bert.Server.target_qps": 1500, "bert.Offline.min_duration": "60000"})
    assert [o.line() for o in settings_of(p).overrides] == [
        "bert.Server.target_qps = 1500",
        "bert.Offline.min_duration = 60000",
    ]


# -- parameters --------------------------------------------------------------------------------
def test_default_scenarios_per_model() -> None:
    assert settings_of(params()).scenarios == ("Offline", "Server", "SingleStream")
    assert settings_of(params(Model="3d-unet")).scenarios == ("Offline", "SingleStream")
    assert settings_of(params(Model="llama2-70b")).scenarios == ("Offline", "Server")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"Model": "rnnt"}, "unknown model 'rnnt' (known: bert, 3d-unet"),
        ({"Scenarios": "Server", "Model": "3d-unet"}, "Scenarios: the harness has no Server config for 3d-unet"),
        ({"ConfigVersion": "fastest"}, "ConfigVersion: unknown config version 'fastest'"),
        ({"TestModes": "Perf"}, "TestModes: unknown test mode 'Perf'"),
        ({"LoadGenOverrides": "bert.Server.target_qsp=1"}, "LoadGenOverrides: bert.Server.target_qsp: NVIDIA's"),
        ({"DockerBaseUrl": "ssh://root@10.0.0.4"}, "ssh:// is not used"),
        ({"SystemDescription": "{}"}, "SystemDescription: missing field gpu_name"),
    ],
)
def test_bad_parameters_raise_one_clear_error(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        params(**kw)


def test_profile_loader_names_the_place_of_an_unknown_model(tmp_path: Path) -> None:

    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"Description": "d", "Actions": [{"Type": "MLPerfExecutor", "Parameters": {"Model": "rnnt"}}]})
    )
    with pytest.raises(ProfileError) as err:
        resolve_profile(load_profile(str(path)))
    assert "p.json: Actions[0].Parameters.Model" in str(err.value) and "unknown model 'rnnt'" in str(err.value)


# -- gpuconfigs --------------------------------------------------------------------------------
def test_table_takes_each_count_from_its_own_class_and_scales_only_without_one() -> None:
    table = load_table()
    eight = table.resolve("NVIDIA H100 80GB HBM3", 8, "bert", "Offline")
    assert eight.fields["offline_expected_qps"] == 9400 * 8 and eight.scaled_from is None
    assert eight.source_class == "H100_SXM_80GBx8"
    # A100 80GB x1 has its own class with other values than x8 / 8 (3500, not 30000 / 8).
    one = table.resolve("NVIDIA A100-SXM4-80GB", 1, "bert", "Offline")
    assert one.fields["offline_expected_qps"] == 3500 and one.source_class == "A100_SXM_80GBx1"
    # No x4 class: derived from x1, throughput scaled, latency not, and marked as scaled.
    four = table.resolve("NVIDIA H100 80GB HBM3", 4, "bert", "SingleStream")
    assert four.fields["single_stream_expected_latency_ns"] == 1700000 and four.scaled_from == 1
    assert "scaled from x1 to x4" in four.source()
    assert table.resolve("NVIDIA H200", 8, "llama2-70b", "Offline").fields["offline_expected_qps"] == 104


def test_table_reports_what_nvidia_did_not_publish() -> None:
    table = load_table()
    problem = table.entry_problem("NVIDIA A100-SXM4-40GB", "bert", "Server")
    assert problem is not None and "no A100_SXM4_40GB bert Server class" in problem
    with pytest.raises(ProfileError, match=r"gpuconfigs/A100_SXM4_40GB\.json"):
        table.resolve("NVIDIA A100-SXM4-40GB", 8, "bert", "Server")
    assert table.entry_problem("NVIDIA H200", "bert", "SingleStream") is not None
    assert table.entry_problem("NVIDIA A100-SXM4-80GB", "gptj", "Offline") is not None
    # Published, and no longer reported missing: 99.9% variants and the pairs the old table lacked.
    for gpu, model, scenario in (
        ("NVIDIA H200", "bert", "Offline"),
        ("NVIDIA H100 80GB HBM3", "gptj", "Offline"),
        ("NVIDIA H200", "llama2-70b", "Offline"),
        ("NVIDIA H100 80GB HBM3", "llama2-70b", "Server"),
        ("NVIDIA A100-SXM4-80GB", "bert", "Offline"),
    ):
        assert table.entry_problem(gpu, model, scenario, high_accuracy=True) is None, (gpu, model, scenario)
    assert table.entry_problem("NVIDIA H200", "llama2-70b", "Server") is None
    assert table.entry_problem("NVIDIA A100-SXM4-80GB", "3d-unet", "SingleStream") is None


def test_an_engine_wider_than_the_machine_is_refused() -> None:
    table = load_table()
    # NVIDIA's smallest H100 llama2-70b class is TP2 on two GPUs: one H100 cannot run it.
    one = table.resolve("NVIDIA H100 80GB HBM3", 1, "llama2-70b", "Offline")
    problem = gpu_count_problem(one)
    assert problem is not None and "needs a multiple of 2 GPUs" in problem and "has 1" in problem
    assert gpu_count_problem(table.resolve("NVIDIA H100 80GB HBM3", 8, "llama2-70b", "Offline")) is None
    assert gpu_count_problem(table.resolve("NVIDIA H200", 1, "llama2-70b", "Offline")) is None  # TP1 on H200


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["configs"]["bert"]["Offline"]["k_99"]["1"]["fields"].update(gpu_batchsize=3),
            "gpu_batchsize: unknown field",
        ),
        (lambda d: d["configs"].update(rnnt={}), "configs.rnnt: unknown model"),
        (
            lambda d: d["configs"]["bert"]["Offline"]["k_99"]["1"]["fields"].pop("offline_expected_qps"),
            "Offline needs offline_expected_qps",
        ),
        (lambda d: d["configs"]["bert"]["Offline"].update(k_95={}), "unknown accuracy target"),
        (lambda d: d["configs"]["bert"]["Offline"]["k_99"]["1"].pop("class"), "class"),
        (lambda d: d.update(sku="Other"), "sku: is 'Other' but the file is named"),
    ],
)
def test_table_validation_names_file_and_key(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads((Path(__file__).parent.parent / "gpuconfigs" / "A100_SXM4_40GB.json").read_text())
    edit(data)
    (tmp_path / "A100_SXM4_40GB.json").write_text(json.dumps(data))
    with pytest.raises(ProfileError) as err:
        load_table(tmp_path)
    assert "gpuconfigs/A100_SXM4_40GB.json" in str(err.value) and message in str(err.value)


# -- container options -------------------------------------------------------------------------
def test_container_name_and_run_options_follow_launch_docker() -> None:
    assert container_name("alice", "arm64") == "mlperf-inference-alice-aarch64"
    spec = ContainerSpec(
        name="mlperf-inference-alice-x86_64",
        image="img",
        nvidia_dir="/r/closed/NVIDIA",
        scratch_path="/mnt/scratch",
        user="1000:1000",
    )
    opts = run_options(spec)
    assert opts["volumes"]["/r/closed/NVIDIA"] == {"bind": "/work", "mode": "rw"}
    assert opts["volumes"]["/mnt/scratch"]["bind"] == "/mnt/scratch"
    assert opts["working_dir"] == "/work" and opts["network_mode"] == "host" and opts["shm_size"] == "32g"
    assert opts["cap_add"] == ["SYS_ADMIN", "SYS_TIME"] and "seccomp=unconfined" in opts["security_opt"]
    assert opts["ulimits"][0]["Name"] == "memlock" and opts["ulimits"][0]["Hard"] == -1
    assert opts["environment"]["MLPERF_SCRATCH_PATH"] == "/mnt/scratch" and opts["user"] == "1000:1000"
    gpus = opts["device_requests"][0]
    assert gpus["Count"] == -1 and gpus["Capabilities"] == [["gpu"]]
    assert "device_requests" not in run_options(ContainerSpec(**{**spec.__dict__, "use_gpus": False}))


# -- results -----------------------------------------------------------------------------------
def test_results_are_mapped_from_this_runs_log_dir_only() -> None:
    log = "/r/build/logs/workload-1-bert-perf"
    listing = "\n".join(
        [
            f"{log}/stdout.txt",
            f"{log}/SYS_TRT/bert-99/Offline/metadata.json",
            f"{log}/SYS_TRT/bert-99/Offline/mlperf_log_detail.txt",
            f"{log}/SYS_TRT/bert-99.9/Server/mlperf_log_detail.txt",
            "/r/build/logs/2024.01.01-00.00.00/SYS_TRT/bert-99/SingleStream/metadata.json",
        ]
    )
    found = results.map_results(results.parse_listing(log, listing), "PerformanceOnly")
    assert {(f.expected.scenario, f.system_name) for f in found} == {("Offline", "SYS_TRT"), ("Server", "SYS_TRT")}
    assert all(f.expected.model == "bert" for f in found)


def test_a_result_is_keyed_by_its_accuracy_target_too() -> None:
    log = "/r/build/logs/workload-1-bert-perf"
    found = results.map_results(
        results.parse_listing(log, f"{log}/SYS_TRT/bert-99/Offline/metadata.json\n"), "PerformanceOnly"
    )
    have = {f.expected for f in found}
    assert results.Expected("bert", "bert-99", "Offline", "PerformanceOnly") in have
    # ConfigVersion=default,high_accuracy: the 99.9% result is its own expectation, not met by bert-99.
    assert results.Expected("bert", "bert-99.9", "Offline", "PerformanceOnly") not in have
    p = params(ConfigVersion="default,high_accuracy,triton", Scenarios="Offline")
    assert settings_of(p).benchmarks == ("bert-99", "bert-99.9")
    assert settings_of(p).versions_of("bert-99") == ("default", "triton")


def test_missing_results_are_explained() -> None:
    exp = results.Expected("bert", "bert-99", "Server", "PerformanceOnly")
    unknown = results.explain_missing(
        exp,
        "[I] Detected system did not match any known systems. Exiting.",
        system_text="GPUs: 8x NVIDIA A100-SXM4-40GB",
    )
    assert "8x NVIDIA A100-SXM4-40GB" in unknown and "RequireCustomSystemSupport" in unknown
    warnings = (
        "[W] No registered config for bert.Server.DGX-A100_A100-SXM4-40GBx8 for "
        "WorkloadSetting(HarnessType.Custom, AccuracyTarget.k_99_9, PowerSetting.MaxP)\n"
        "[W] No registered config for bert.Server.DGX-A100_A100-SXM4-40GBx8 for "
        "WorkloadSetting(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)\n"
    )
    missing = results.explain_missing(exp, warnings, system_text=None)
    assert (
        "no registered config for bert.Server.DGX-A100_A100-SXM4-40GBx8 "
        "WorkloadSetting(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP); "
        "set the parameter RequireCustomSystemSupport=true" in missing
    )
    high = results.explain_missing(
        results.Expected("bert", "bert-99.9", "Server", "AccuracyOnly"), warnings, system_text=None
    )
    assert "AccuracyTarget.k_99_9" in high
    assert "crashed: RuntimeError: boom" in results.explain_missing(
        exp, "Traceback (most recent call last):\nRuntimeError: boom", system_text=None
    )


# -- plan --------------------------------------------------------------------------------------
def facts(**kw: object) -> MLPerfFacts:
    base: dict[str, object] = dict(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(4, 1),
        commit="abcdef1234567890",
        scratch_path="/s",
        machine="x86_64",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        build_exists=True,
    )
    base.update(kw)
    return MLPerfFacts(**base)  # type: ignore[arg-type]


def test_plan_lists_setup_build_and_runs_with_exact_commands() -> None:
    plan = plan_mlperf(
        params(Scenarios="Offline,Server", Quick=True, RequireCustomSystemSupport=True), facts(), run_id="R"
    )
    summaries = [c.summary for c in plan.changes]
    # In the order they run: the system check and custom system come before any download.
    custom = next(i for i, s in enumerate(summaries) if "register a custom system" in s)
    setup = next(i for i, s in enumerate(summaries) if s.startswith("set up bert:"))
    build = next(i for i, s in enumerate(summaries) if s.startswith("make build (harness commit abcdef123456)"))
    engines = next(i for i, s in enumerate(summaries) if s.startswith("generate the engines of bert Offline,Server"))
    runs = [i for i, s in enumerate(summaries) if s.startswith("run bert")]
    assert custom < setup < build < engines < runs[0] and len(runs) == 2
    assert "set up bert: download_data, download_model, preprocess_data (BENCHMARKS=bert only)" in summaries
    assert "run bert Offline,Server PerformanceOnly (quick: --test_run)" in summaries
    assert plan.changes[custom].commands[0].display() == (
        "docker exec -u 1000:1000 -w /work mlperf-inference-alice-x86_64 python3 -m scripts.get_system_id"
    )
    assert plan.changes[engines].commands[0].display() == (
        "docker exec -u 1000:1000 -w /work mlperf-inference-alice-x86_64 make generate_engines "
        "'RUN_ARGS=--benchmarks=bert --scenarios=Offline,Server --config_ver=default' EXTERNAL_USER=1"
    )
    run = next(c for c in plan.changes if c.summary.startswith("run bert Offline,Server AccuracyOnly"))
    assert run.commands[0].display() == (
        "docker exec -u 1000:1000 -w /work mlperf-inference-alice-x86_64 make run_harness "
        "'RUN_ARGS=--benchmarks=bert --scenarios=Offline,Server --config_ver=default "
        "--test_mode=AccuracyOnly --test_run' "
        "LOG_DIR=build/logs/workload-R-bert-acc EXTERNAL_USER=1"
    )


def test_plan_splits_runs_by_overrides_and_names_ignored_ones() -> None:
    plan = plan_mlperf(
        params(**{"bert.Offline.min_duration": 30000, "3d-unet.*.min_duration": 1}, TestModes="PerformanceOnly"),
        facts(),
        run_id="R",
    )
    runs = [c for c in plan.changes if c.summary.startswith("run bert")]
    assert [r.summary for r in runs] == [
        "run bert Offline PerformanceOnly with min_duration=30000",
        "run bert Server,SingleStream PerformanceOnly",
    ]
    assert "LOG_DIR=build/logs/workload-R-bert-perf-g2" in runs[1].commands[0].display()
    assert "--min_duration" not in runs[1].commands[0].display()
    assert "overrides not read by bert Offline,Server,SingleStream: 3d-unet.*.min_duration" in plan.notes


def test_plan_skips_finished_setup_and_build() -> None:
    done = {setup_key("/s", "bert", s): "t" for s in ("download_data", "download_model", "preprocess_data")}
    done[build_key("/r/closed/NVIDIA", "abcdef1234567890")] = "t"
    plan = plan_mlperf(params(), facts(done=done))
    assert not any("set up" in c.summary or c.summary.startswith("make build") for c in plan.changes)
    assert "setup of bert already done (download_data, download_model, preprocess_data)" in plan.notes
    # Another model's stages are not done: only bert's were.
    assert any("set up 3d-unet" in c.summary for c in plan_mlperf(params(Model="3d-unet"), facts(done=done)).changes)
    # A new commit builds again.
    assert any(
        c.summary.startswith("make build") for c in plan_mlperf(params(), facts(done=done, commit="ffff")).changes
    )


def test_plan_before_clone_assumes_v41_and_says_so() -> None:
    plan = plan_mlperf(params(Quick=True), facts(nvidia_dir=None, nvidia_dir_exists=False, version=None, commit=None))
    assert any("assuming v4.1" in n for n in plan.notes)


def test_a_loadgen_key_in_parameters_reaches_its_model_and_scenario_with_the_shipped_profile() -> None:
    # `workload run --profile PERF-GPU-MLPERF --parameters "bert.Server.target_qps=1234"`: no step of the
    # shipped profile refers to that key, yet it must reach bert's Server run (and nothing else).
    from workload.actions.mlperf_executor import MLPerfParameters

    profile = resolve_profile(load_profile("PERF-GPU-MLPERF"), {"bert.Server.target_qps": "1234"})
    assert not any("bert.Server.target_qps" in w for w in profile.warnings), profile.warnings
    by_model = {}
    for step in profile.steps:
        if step.type_name == "MLPerfExecutor":
            assert isinstance(step.params, MLPerfParameters)
            by_model[step.params.Model] = plan_mlperf(step.params, facts(), run_id="R")
    bert_runs = [c for c in by_model["bert"].changes if c.summary.startswith("run bert")]
    server = [c for c in bert_runs if "Server" in c.summary]
    assert server and all("server_target_qps=1234" in c.summary for c in server)
    assert all("--server_target_qps=1234" in c.commands[0].display() for c in server)
    # A Server-only field does not split the run: the harness reads --server_target_qps for Server only
    # (fields.py scopes it), so Offline and SingleStream keep their own targets.
    assert all("--offline_expected_qps" not in c.commands[0].display() for c in bert_runs)
    unet = [c for c in by_model["3d-unet"].changes if c.summary.startswith("run 3d-unet")]
    assert unet and not any("1234" in c.commands[0].display() for c in unet)
    assert "overrides not read by 3d-unet Offline,SingleStream: bert.Server.target_qps" in by_model["3d-unet"].notes


def test_a_bad_loadgen_value_in_parameters_names_the_key() -> None:
    with pytest.raises(ProfileError) as err:
        resolve_profile(load_profile("PERF-GPU-MLPERF"), {"bert.Server.target_qps": "fast"})
    assert "--parameters bert.Server.target_qps" in str(err.value)
    assert "not an integer or a decimal number" in str(err.value)
