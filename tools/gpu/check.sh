#!/usr/bin/env bash
# Builds pt2q against the GPU machine's CUDA torch and runs every test there, in one command.
# The GPU machine reaches no package registry: the Debian packages pt2q builds with
# (protobuf, googletest) and Python test wheels travel in .deps/ (see tools/gpu/README.md)
# and are unpacked into a private sysroot, never into /.
#   usage: bash tools/gpu/check.sh [--sanitize]      (results also under $OUT when set)
#   PT2Q_GPU_TESTS="tests/kernels/test_linear_*.py ..." runs only those test files (the whole
#   suite takes longer than one 10-minute device command: split it over two calls).
#   PT2Q_GPU_KEEP_BUILD=1 keeps an earlier call's build/ (the device keeps ignored build outputs
#   between calls on a warm machine), so a second call rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/pt2q-gpu-out}
mkdir -p "$OUT"
SYSROOT=/tmp/pt2q-sysroot
mkdir -p "$SYSROOT"
for f in .deps/debs/*.deb; do dpkg -x "$f" "$SYSROOT"; done
LIBDIR=$SYSROOT/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -m pip install -q --no-deps --no-index .deps/wheels/*.whl 2>/dev/null || true

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$OUT/gpu.txt"

# The image's default g++ (/opt/gcc) puts libstdc++ code of its own into the shared objects it
# links, which then mixes with the system libstdc++ that torch uses (seen: a crash formatting
# an int in an error message). Build with the system compiler when there is one.
if [[ -x /usr/bin/g++ ]]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
echo "compiler: ${CXX:-$(command -v g++)} ($(${CXX:-g++} -dumpfullversion))"
[[ "${PT2Q_GPU_KEEP_BUILD:-0}" == 1 ]] || rm -rf build
export CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$SYSROOT/usr -DProtobuf_PROTOC_EXECUTABLE=$SYSROOT/usr/bin/protoc \
-DProtobuf_INCLUDE_DIR=$SYSROOT/usr/include -DProtobuf_LIBRARY=$LIBDIR/libprotobuf.so \
-DGTest_DIR=$LIBDIR/cmake/GTest"
start=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -e . > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
grep -E "pt2q:" "$OUT/build.log" || true

status=0
ctest --test-dir build --output-on-failure -j8 > "$OUT/ctest.log" 2>&1 || status=1
tail -3 "$OUT/ctest.log"
# W8A8's Hopper wgmma GEMM against the mma.sync GEMM, bit for bit, then both timed.
if command -v nvcc >/dev/null; then
  { nvcc -std=c++17 -I. --fmad=false -gencode arch=compute_90a,code=sm_90a tools/gpu/wgmma_probe.cu \
      kernels/cuda/linear_dynamic_wgmma_kernels.cu kernels/cuda/linear_dynamic_gemm_kernels.cu \
      kernels/cuda/linear_dynamic_cuda_kernels.cu -o /tmp/wgmma_probe && /tmp/wgmma_probe; } \
    > "$OUT/wgmma_probe.txt" 2>&1 || { status=1; echo "FAILED: tools/gpu/wgmma_probe.cu"; }
  tail -1 "$OUT/wgmma_probe.txt"
fi
# One process per test file, so that a crash in one cannot hide the results of the others.
: > "$OUT/pytest.log"
for f in ${PT2Q_GPU_TESTS:-tests/test_*.py tests/kernels/test_*.py tests/mx/test_*.py tests/graph/test_*.py \
           tests/observers/test_*.py tests/pt2e/test_*.py}; do
  echo "===== $f" >> "$OUT/pytest.log"
  rc=0; python3 -m pytest "$f" -q -p no:cacheprovider --tb=short > /tmp/pt2q-one.log 2>&1 || rc=$?
  # 5: nothing collected (a file whose reference, e.g. torchao, is not installed there)
  if [[ $rc -ne 0 && $rc -ne 5 ]]; then status=1; echo "FAILED: $f"; fi
  cat /tmp/pt2q-one.log >> "$OUT/pytest.log"
  echo "$f: $(tail -1 /tmp/pt2q-one.log)"
done
if [[ "${1:-}" == "--sanitize" ]]; then
  # Every CUDA test file in one memcheck pass (about 70 s plus start-up on the H100).
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest tests/kernels/test_*_cuda.py \
    tests/mx/test_mx_cuda.py tests/pt2e/test_pt2e_cuda.py -q -p no:cacheprovider > "$OUT/memcheck.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
fi
exit $status
