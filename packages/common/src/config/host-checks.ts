// Checks of the config against the host it runs on, made at start (and by `vgpud --check`)
// rather than found later: a VRAM budget the host cannot back would fail guests' allocations
// only once memory ran out, long after the node said it was serving.
import { totalmem } from "node:os";
import { ConfigError } from "./load.js";
import type { Config } from "./schema.js";

/** What the checks need to know of the host (injected, so tests choose it). */
export interface HostFacts {
  /** Memory the process may use: the host's, or its cgroup's limit when lower. */
  readonly memoryBytes: number;
}

export function hostFacts(): HostFacts {
  const total = totalmem();
  const limit = process.constrainedMemory?.() ?? 0;
  return { memoryBytes: limit > 0 && limit < total ? limit : total };
}

const GIB = 1024 ** 3;
const gib = (n: number) => `${(n / GIB).toFixed(1)} GiB`;

/** Throws a ConfigError naming the field when the host cannot run this config. */
export function checkHost(config: Config, host: HostFacts): void {
  const vram = config.device.vramBytes;
  if (vram > host.memoryBytes) {
    throw new ConfigError(
      `config: device.vramBytes = ${vram}: more than this host's memory (${gib(vram)} > ${gib(host.memoryBytes)})`,
    );
  }
}
