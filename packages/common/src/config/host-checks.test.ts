// Proves the host checks made at start: a VRAM budget above the host's memory stops the node
// with a line naming device.vramBytes; one within it passes. The host's facts are injected.
import { describe, expect, it } from "vitest";
import { checkHost, hostFacts } from "./host-checks.js";
import { ConfigError, parseConfig } from "./load.js";

const GIB = 1024 ** 3;

describe("checkHost", () => {
  it("refuses device.vramBytes above the host's memory, naming the field", () => {
    const config = parseConfig({ device: { vramBytes: "8GiB" } });
    const check = () => checkHost(config, { memoryBytes: 4 * GIB });
    expect(check).toThrow(ConfigError);
    expect(check).toThrow(
      /^config: device\.vramBytes = 8589934592: more than this host's memory \(8\.0 GiB > 4\.0 GiB\)$/,
    );
  });

  it("takes device.vramBytes up to the host's memory", () => {
    const config = parseConfig({ device: { vramBytes: "4GiB" } });
    expect(() => checkHost(config, { memoryBytes: 4 * GIB })).not.toThrow();
  });

  it("reads this host's memory as a positive number of bytes", () => {
    expect(hostFacts().memoryBytes).toBeGreaterThan(0);
  });
});
