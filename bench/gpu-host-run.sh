#!/bin/bash
# The command that produced bench/results/gpu*.json on the lent GPU machines (docs/benchmarks.md,
# "gpu"), run from the root of a checkout whose .gpu/ holds: node.xz (a Node 20 linux-x64
# binary, xz), libvulkan1_*.deb, webgpu/ (the npm package's index.js, package.json and
# dist/linux-x64/dawn.node.xz), wt-webgpu-int.tar.xz (this tree built: dist folders and
# node_modules without @bufbuild, @biomejs, typescript and webgpu), wgi-pb.tar.xz
# (node_modules/@bufbuild/protobuf), wgi-overlay.tar.xz (files rebuilt since the tarball), and
# .gl/ the libglvnd debs (libglvnd0 …: the NVIDIA ICD needs libGLdispatch). Writes logs and
# gpu.json to $OUT. GPUS=2: each pair's nodes on two GPUs (VGPUHA_TEST_GPUS). TARBALLS: the
# tarballs of the built tree, unpacked in order (default: the three above). LATENCY=1 also runs
# `bench -- gpu-latency` first (with BENCH_GPU_OLD_MODULE=packages/gpu-webgpu-old/dist/index.js
# when the tarball holds an older build's gpu-webgpu there). SKIP_BENCH=1 leaves out the gpu
# benchmark, SKIP_TESTS=1 the GPU tests. TRACE=1: after the tests, the gemm2048 phase traced
# (where each stall sits: $OUT/stalls.txt; docs/benchmarks.md "gpu"). DIAG: a command run after
# the tests (its output in diag.log), e.g. the gemm phase alone:
# DIAG='BENCH_GPU_GEMM_ONLY=1 node bench/dist/run.js gpu'.
set -o pipefail
T0=$(date +%s)
mkdir -p /tmp/n && xz -dc .gpu/node.xz > /tmp/n/node && chmod +x /tmp/n/node && export PATH=/tmp/n:$PATH
dpkg -x .gpu/libvulkan1_*.deb / && for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
mkdir -p /tmp/w && for t in ${TARBALLS:-.gpu/wt-webgpu-int.tar.xz .gpu/wgi-pb.tar.xz .gpu/wgi-overlay.tar.xz}; do tar -xJf $t -C /tmp/w || exit 1; done
mkdir -p /tmp/w/node_modules/webgpu && cp -r .gpu/webgpu/. /tmp/w/node_modules/webgpu/ && xz -df /tmp/w/node_modules/webgpu/dist/linux-x64/dawn.node.xz
cd /tmp/w
nvidia-smi -L | tee $OUT/host.txt; node --version | tee -a $OUT/host.txt
ls -la /usr/share/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d /etc/vulkan/icd.d >> $OUT/host.txt 2>&1; ldd $(ldconfig -p | grep -o '/.*libGLX_nvidia.so.0' | head -1) >> $OUT/host.txt 2>&1
echo '{"nodeId":"x","role":"standalone"}' > /tmp/check.json
if ! node packages/daemon/dist/bin/vgpud.js --config /tmp/check.json --check-gpu > $OUT/check-gpu.txt 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  echo "retry with VK_DRIVER_FILES=$VK_DRIVER_FILES" >> $OUT/check-gpu.txt
  node packages/daemon/dist/bin/vgpud.js --config /tmp/check.json --check-gpu >> $OUT/check-gpu.txt 2>&1
fi
echo "check-gpu exit $?" >> $OUT/check-gpu.txt; cat $OUT/check-gpu.txt
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}" >> $OUT/host.txt
if [ "${GPUS:-1}" -ge 2 ]; then
  ls -la /dev/nvidia* >> $OUT/host.txt 2>&1
  if unshare -m sh -c 'mount --bind /dev/null /dev/nvidia1 && nvidia-smi -L' >> $OUT/host.txt 2>&1; then echo "placement: unshare ok" | tee -a $OUT/host.txt; else echo "placement: unshare FAILED, one GPU" | tee -a $OUT/host.txt; GPUS=1; fi
  nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader -lms 500 > $OUT/nvsmi.csv 2>&1 &
  SMI=$!
fi
if [ -n "${LATENCY:-}" ]; then
  echo "== bench gpu-latency $(($(date +%s)-T0)) s"
  [ -f packages/gpu-webgpu-old/dist/index.js ] && export BENCH_GPU_OLD_MODULE=$PWD/packages/gpu-webgpu-old/dist/index.js
  timeout 200 node bench/dist/run.js gpu-latency 2>&1 | tee $OUT/latency.log | grep -vE "^note|^---|^name"
  cp bench/results/gpu-latency.json $OUT/ 2>/dev/null
  unset BENCH_GPU_OLD_MODULE
fi
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "== test:gpu (${TESTS:-every GPU test}) $(($(date +%s)-T0)) s"
  VGPUHA_TEST_GPUS=${GPUS:-1} timeout ${TEST_S:-250} node node_modules/vitest/vitest.mjs run --project gpu ${TESTS:-} > $OUT/test-gpu.log 2>&1
  echo "test:gpu exit $?"; grep -E "×|FAIL|Test Files|Tests " $OUT/test-gpu.log | head -40
fi
if [ -n "${TRACE:-}" ]; then
  # The gemm2048 phase alone with every node's seq trace (BENCH_SEQ_TRACE): where each launch
  # over 10 ms stalled, in $OUT/stalls.txt (bench/seq-trace.ts); TRACE_FILES=1 also keeps the
  # raw trace ($OUT/seq-trace.tar.xz). TRACE_MODES (sync), TRACE_ROUNDS (2), TRACE_MEASURE_MS.
  echo "== traced gemm2048 $(($(date +%s)-T0)) s"
  rm -rf /tmp/seq-trace && mkdir -p /tmp/seq-trace
  VGPUHA_TEST_GPUS=${GPUS:-1} BENCH_SEQ_TRACE=/tmp/seq-trace BENCH_GPU_GEMM_ONLY=1 BENCH_GPU_MODES=${TRACE_MODES:-sync} \
    BENCH_ROUNDS=${TRACE_ROUNDS:-2} BENCH_GPU_MEASURE_MS=${TRACE_MEASURE_MS:-2000} \
    timeout ${TRACE_S:-150} node bench/dist/run.js gpu > $OUT/trace.log 2>&1
  node bench/dist/seq-trace.js /tmp/seq-trace 10 3 > $OUT/stalls.txt 2>&1
  grep -vE "^\s*$" $OUT/trace.log | tail -8; grep -E "round|stalls \(|\(pid" $OUT/stalls.txt | head -30
  [ -n "${TRACE_FILES:-}" ] && tar -C /tmp -cJf $OUT/seq-trace.tar.xz seq-trace
fi
if [ -n "${DIAG:-}" ]; then
  echo "== diagnosis $(($(date +%s)-T0)) s: $DIAG"
  VGPUHA_TEST_GPUS=${GPUS:-1} bash -c "$DIAG" > $OUT/diag.log 2>&1; grep -vE "^\s*$" $OUT/diag.log | tail -40
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== bench gpu $(($(date +%s)-T0)) s"
  VGPUHA_TEST_GPUS=${GPUS:-1} timeout ${BENCH_S:-300} node bench/dist/run.js gpu 2>&1 | tee $OUT/bench-gpu.log | tail -70
  cp bench/results/gpu.json $OUT/ 2>/dev/null
fi
[ -n "${SMI:-}" ] && kill $SMI
echo "== done $(($(date +%s)-T0)) s"
