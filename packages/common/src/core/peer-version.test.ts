// Proves the version compatibility rule: builds of one replication protocol replicate whatever
// their package versions (a rolling upgrade), other protocols do not, and a hello without a
// version (a build from before the announcement) counts as protocol 1.
import { describe, expect, it } from "vitest";
import {
  announcedProtocol,
  announcedVersion,
  compatibleVersions,
  describeVersion,
  REPLICATION_PROTOCOL_VERSION,
} from "./peer-version.js";

const own = { version: "0.1.0", protocolVersion: 1 };

describe("compatibleVersions", () => {
  it("accepts the same protocol whatever the package versions", () => {
    expect(compatibleVersions(own, { version: "0.1.0", protocolVersion: 1 })).toBe(true);
    expect(compatibleVersions(own, { version: "0.2.0", protocolVersion: 1 })).toBe(true);
    expect(compatibleVersions(own, { version: "0.0.9", protocolVersion: 1 })).toBe(true);
  });

  it("refuses another protocol, older or newer", () => {
    expect(compatibleVersions(own, { version: "0.1.0", protocolVersion: 2 })).toBe(false);
    const newer = { version: "0.3.0", protocolVersion: 3 };
    expect(compatibleVersions(newer, { version: "0.2.0", protocolVersion: 2 })).toBe(false);
  });

  it("takes a hello without versions for protocol 1, of an unknown package version", () => {
    expect(announcedProtocol({})).toBe(1);
    expect(announcedVersion({})).toEqual({ version: "unknown", protocolVersion: 1 });
    expect(compatibleVersions(own, {})).toBe(true);
    expect(compatibleVersions({ version: "9", protocolVersion: 2 }, {})).toBe(false);
  });

  it("is symmetric, so both ends of a pair decide alike", () => {
    for (const a of [1, 2, 3]) {
      for (const b of [1, 2, 3]) {
        const x = { version: "x", protocolVersion: a };
        const y = { version: "y", protocolVersion: b };
        expect(compatibleVersions(x, y)).toBe(compatibleVersions(y, x));
      }
    }
  });

  it("describes a version for people", () => {
    expect(describeVersion(own)).toBe("vgpud 0.1.0 (replication protocol 1)");
    expect(REPLICATION_PROTOCOL_VERSION).toBeGreaterThanOrEqual(1);
  });
});
