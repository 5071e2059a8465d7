#!/usr/bin/env bash
# PERF-GPU-QUALIFY on a lent GPU machine (docs/gpu-qualify-device.md): one call of the device tool,
#   run(command="bash docs/gpu-qualify-device.sh", carry=[".whl"], timeout_s=480)
# with the wheels of docs/gpu-qualify-device.md in .whl/. Everything it reports lands in $OUT:
#   device.txt     nvidia-smi, versions        gpu-tests.txt  the gpu-marked tests
#   profile.txt    the profile's console       run.tgz        the profile's run folder
# Each stage is bounded and the next one runs whatever the last one did. QUALIFY_PARAMS overrides the
# profile's parameters (default: short runs; QUALIFY_PARAMS= runs the profile as shipped); GPU_TESTS=0 skips
# the gpu-marked tests.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT to a folder for the results}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
{
    date -u; nproc; nvidia-smi; nvidia-smi -q
    python3 -c 'import sys, torch, numpy, mlperf_loadgen, pydantic; print(sys.version); print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)); print("numpy", numpy.__version__, "pydantic", pydantic.VERSION)'
    python3 -m pip list 2>/dev/null | grep -iE '^(pytest|torch|numpy) '
} > "$OUT/device.txt" 2>&1
echo "device: $(grep -m1 'H200\|NVIDIA' "$OUT/device.txt")"

[ "${GPU_TESTS:-1}" = 0 ] || timeout -k 10 -s INT 180 python3 -m pytest -q -p no:cacheprovider -m gpu -rA \
    tests/test_gpu.py tests/test_qualify_models.py tests/test_qualify_profile.py 2>&1 | tee "$OUT/gpu-tests.txt" | tail -25

rm -rf /tmp/runs
params=(); [ -n "${QUALIFY_PARAMS-MinDurationMs=5000,,,SampleCount=512}" ] && params=(-p "${QUALIFY_PARAMS-MinDurationMs=5000,,,SampleCount=512}")
timeout -k 10 -s INT 200 python3 -m workload run --profile PERF-GPU-QUALIFY --history off "${params[@]}" \
    --output-dir /tmp/runs 2>&1 | tee "$OUT/profile.txt" | tail -40
echo "profile exit: ${PIPESTATUS[0]}"
tar -C /tmp/runs -czf "$OUT/run.tgz" . && ls -la "$OUT"
