import { readFileSync } from "node:fs";
import { type Config, type NodeVersion, REPLICATION_PROTOCOL_VERSION } from "@vgpu-ha/common";
import { type DeviceSetup, modelKernelContract } from "./device/device-setup.js";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};

export const VERSION: string = pkg.version;

/**
 * What this node announces in its replication hellos and accepts from its peer (core/
 * peer-version.ts): the package version and this build's protocol version — or, for tests
 * only, config testing.protocolVersion's — and its device's kernel contract and description
 * (testing.kernelContractVersion overrides the contract).
 */
export function nodeVersion(config: Config, device?: DeviceSetup): NodeVersion {
  return {
    version: VERSION,
    protocolVersion: config.testing.protocolVersion ?? REPLICATION_PROTOCOL_VERSION,
    kernelContract:
      device?.kernelContract ?? config.testing.kernelContractVersion ?? modelKernelContract(),
    device: device?.description ?? "model",
  };
}
