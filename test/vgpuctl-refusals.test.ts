// Proves the built vgpuctl exits by the code a node's refusal carries, end to end: a real ops
// app (buildOpsApp, on 127.0.0.1) whose admin actions throw each operator refusal as a
// VgpuError, and vgpuctl run as an operator runs it; the exit code is the one its --help lists
// for that code, and the code is printed with the message. One command per kind of answer (409,
// 504, each admin endpoint vgpuctl calls); exit-codes.test.ts covers every code of the table.
import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { ExitCode } from "@vgpu-ha/client/exit-codes";
import { ErrorCode, VgpuError } from "@vgpu-ha/common/core";
import { buildOpsApp } from "@vgpu-ha/daemon";
import type { FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VGPUCTL_BIN } from "./support/vgpuctl.js";

const TOKEN = "token-for-vgpuctl-refusals";

/** What the node's actions throw next. */
let next: VgpuError = new VgpuError(ErrorCode.INTERNAL);
const refuse = async (): Promise<Record<string, unknown>> => {
  throw next;
};

let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  app = buildOpsApp({
    registry: new Registry(),
    status: () => ({ nodeId: "a", role: "primary", epoch: 1 }),
    readiness: () => ({ ready: true, reason: "" }),
    adminToken: TOKEN,
    admin: { promote: refuse, demote: refuse, switchover: refuse, reinit: refuse, verify: refuse },
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(() => app.close());

/** Runs vgpuctl against the node (without blocking this process: it serves the node). */
function vgpuctl(token: string, ...args: string[]): Promise<{ code: number; err: string }> {
  const argv = [VGPUCTL_BIN, "--node", url, "--token", token, ...args];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { timeout: 30_000, env: {} }, (e, _out, err) => {
      resolve({ code: e ? Number(e.code) : 0, err });
    });
  });
}

describe("vgpuctl exits by the refusal's code", () => {
  it.each([
    [["promote"], ErrorCode.PRIMARY_LEASED, ExitCode.primaryLeased],
    [["switchover", "--no-wait"], ErrorCode.SWITCHOVER_IN_PROGRESS, ExitCode.switchoverInProgress],
    [["switchover", "--no-wait"], ErrorCode.STANDBY_TIMED_OUT, ExitCode.standbyTimedOut],
    [["verify"], ErrorCode.NO_STANDBY_IN_SYNC, ExitCode.noStandbyInSync],
    [["reinit", "URL", "--no-wait"], ErrorCode.NO_PRIMARY_IN_SIGHT, ExitCode.noPrimaryInSight],
  ] as const)("%s refused with %s exits %s", async (args, code, exit) => {
    next = new VgpuError(code, "refused for the test");
    const r = await vgpuctl(TOKEN, ...args.map((a) => (a === "URL" ? url : a)));
    expect(r.code, r.err).toBe(exit);
    expect(r.err).toContain(`${ErrorCode[code]}: refused for the test`);
  });

  it("a wrong token still exits 4 (refused), naming UNAUTHENTICATED", async () => {
    const r = await vgpuctl("wrong-token", "promote");
    expect(r.code, r.err).toBe(ExitCode.refused);
    expect(r.err).toContain("401 UNAUTHENTICATED");
  });
});
