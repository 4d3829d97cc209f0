// Where a GPU test's or benchmark's node runs on a host of several GPUs. Dawn takes the first
// adapter, and GPUs of one model share an adapter name, so two nodes that see every GPU both
// land on GPU 0 (docs/gpu.md, "Two GPUs in one host"). VGPUHA_TEST_GPUS=N (N ≥ 2) puts node k on
// GPU k mod N: its vgpud runs in a private mount namespace where every other /dev/nvidiaI is
// /dev/null (needs root, as the GPU host's runs have; a systemd unit does the same with the
// drop-ins in deploy/systemd/gpu/). Unset or 1: no wrap, every node on the one GPU.

/** How many GPUs the GPU tests spread their nodes over (VGPUHA_TEST_GPUS, default 1). */
export function testGpus(): number {
  const n = Number(process.env.VGPUHA_TEST_GPUS ?? "1");
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

/** The spawn wrap (spawnVgpud's `wrap`) that shows node `index` only GPU index mod N. */
export function gpuWrap(index: number, gpus = testGpus()): string[] | undefined {
  if (gpus < 2) return undefined;
  const own = index % gpus;
  const hide = Array.from({ length: gpus }, (_, i) => i)
    .filter((i) => i !== own)
    .map((i) => `mount --bind /dev/null /dev/nvidia${i}`)
    .join(" && ");
  return ["unshare", "-m", "sh", "-c", `${hide} && exec "$@"`, "sh"];
}
