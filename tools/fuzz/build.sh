#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (apt-get install clang): the IR core and the proto
# layer compiled with -fsanitize=fuzzer,address, linked against the installed torch's libtorch.
# Needs a configured build/ (for the generated protobuf sources): run `make build` first.
#   bash tools/fuzz/build.sh && build/fuzz/ir_parser_fuzzer tools/fuzz/corpus/ir_parser -max_total_time=600
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=build/fuzz
rm -rf "$OUT/obj" && mkdir -p "$OUT/obj"
TORCH=$(python -c "import torch, os; print(os.path.dirname(torch.__file__))")
SAN="-fsanitize=fuzzer-no-link,address -g -O1"
COMMON="-std=c++17 -fPIC -D_GLIBCXX_USE_CXX11_ABI=1 -I."
# torch side: never sees the system protobuf headers
for f in graph/*.cpp; do
  clang++ $SAN $COMMON -isystem "$TORCH/include" -c "$f" -o "$OUT/obj/$(basename "$f" .cpp).o" &
done
# proto side: never sees torch's headers (see proto/README.md)
for f in proto/file_header.cpp proto/graph_file.cpp build/proto/proto/file_header.pb.cc build/proto/proto/graph.pb.cc; do
  clang++ $SAN $COMMON -Ibuild/proto -Ibuild/proto/proto -c "$f" -o "$OUT/obj/p_$(basename "$f" | tr . _).o" &
done
wait
for t in graph_file_fuzzer ir_parser_fuzzer; do
  clang++ $SAN $COMMON -isystem "$TORCH/include" -fsanitize=fuzzer tools/fuzz/$t.cpp "$OUT"/obj/*.o \
    -L"$TORCH/lib" -Wl,-rpath,"$TORCH/lib" -ltorch_cpu -lc10 -lprotobuf -o "$OUT/$t"
done
echo "built $OUT/graph_file_fuzzer $OUT/ir_parser_fuzzer"
