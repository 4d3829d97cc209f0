import { readFileSync } from "node:fs";
import { type Config, type NodeVersion, REPLICATION_PROTOCOL_VERSION } from "@vgpu-ha/common";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};

export const VERSION: string = pkg.version;

/**
 * What this node announces in its replication hellos and accepts from its peer (core/
 * peer-version.ts): the package version and this build's protocol version — or, for tests
 * only, config testing.protocolVersion's.
 */
export function nodeVersion(config: Config): NodeVersion {
  return {
    version: VERSION,
    protocolVersion: config.testing.protocolVersion ?? REPLICATION_PROTOCOL_VERSION,
  };
}
