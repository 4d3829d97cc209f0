// Proves vgpuctl's exit code for a node's error answer is keyed on the catalogue code it carries
// (each refusal code to its own number, the same whatever the HTTP status), falls back to 4 for
// a refusal without a known code and 5 for other failures, and that --help lists every number.
import { ErrorCode } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import { EXIT_CODES_HELP, ExitCode, exitCodeFor } from "./exit-codes.js";

describe("vgpuctl exit codes", () => {
  it.each([
    ["NOT_PRIMARY", ExitCode.wrongRole],
    ["NOT_STANDBY", ExitCode.wrongRole],
    ["PRIMARY_LEASED", ExitCode.primaryLeased],
    ["REPLICA_INELIGIBLE", ExitCode.replicaIneligible],
    ["HANDOVER_FAILED", ExitCode.noStandbyInSync],
    ["NO_STANDBY_IN_SYNC", ExitCode.noStandbyInSync],
    ["NO_PRIMARY_IN_SIGHT", ExitCode.noPrimaryInSight],
    ["SWITCHOVER_IN_PROGRESS", ExitCode.switchoverInProgress],
    ["LEADER_KEY_HELD", ExitCode.leaderKeyHeld],
    ["STANDBY_TIMED_OUT", ExitCode.standbyTimedOut],
  ] as const)("%s exits %s, whatever the HTTP status", (code, exit) => {
    expect(code in ErrorCode).toBe(true);
    for (const status of [409, 504, 500]) expect(exitCodeFor(status, code)).toBe(exit);
  });

  it("exits 4 for a refusal without a code it keys on, 5 for anything else", () => {
    expect(exitCodeFor(401, "UNAUTHENTICATED")).toBe(ExitCode.refused);
    expect(exitCodeFor(403, "ADMIN_DISABLED")).toBe(ExitCode.refused);
    expect(exitCodeFor(409, undefined)).toBe(ExitCode.refused);
    expect(exitCodeFor(409, "A_CODE_FROM_A_NEWER_NODE")).toBe(ExitCode.refused);
    expect(exitCodeFor(404, "UNKNOWN_SESSION")).toBe(ExitCode.failure);
    expect(exitCodeFor(500, undefined)).toBe(ExitCode.failure);
  });

  it("keeps the old numbers and gives each exit code one number, all listed in --help", () => {
    expect([ExitCode.ok, ExitCode.checkFailed, ExitCode.usage]).toEqual([0, 1, 2]);
    expect([ExitCode.unreachable, ExitCode.refused, ExitCode.failure]).toEqual([3, 4, 5]);
    const numbers = Object.values(ExitCode);
    expect(new Set(numbers).size).toBe(numbers.length);
    for (const n of numbers) expect(EXIT_CODES_HELP).toMatch(new RegExp(`^  ${n}  `, "m"));
  });
});
