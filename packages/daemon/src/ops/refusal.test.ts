// Proves operator refusals answer as catalogue codes with their HTTP status (inject(), no
// socket): each VgpuError an action throws becomes {error, code: NAME, message} (409, 504 for a
// standby that timed out), the endpoints' own refusals carry codes too (401, 403, NOT_PRIMARY,
// UNKNOWN_SESSION), a node's OpsRefusal keeps its status and code, and an error that is no
// refusal is a 500 without a code.
import { ErrorCode, VgpuError } from "@vgpu-ha/common/core";
import { describe, expect, it } from "vitest";
import type { AdminActions } from "./ops-app.js";
import { codeOr, httpStatusOf, refusalOf } from "./refusal.js";
import { testAdminApp } from "./test-ops-app.js";

const TOKEN = "ops-token-for-refusal-tests";
const auth = { authorization: `Bearer ${TOKEN}` };

const adminApp = (token: string | undefined, admin: AdminActions = {}) =>
  testAdminApp(token, admin, "primary");

const throwing = (e: unknown) => async () => {
  throw e;
};

describe("ops refusals: an action's VgpuError", () => {
  it.each([
    ["promote", ErrorCode.PRIMARY_LEASED, 409],
    ["promote", ErrorCode.REPLICA_INELIGIBLE, 409],
    ["promote", ErrorCode.LEADER_KEY_HELD, 409],
    ["promote", ErrorCode.NOT_STANDBY, 409],
    ["switchover", ErrorCode.HANDOVER_FAILED, 409],
    ["switchover", ErrorCode.SWITCHOVER_IN_PROGRESS, 409],
    ["switchover", ErrorCode.STANDBY_TIMED_OUT, 504],
    ["demote", ErrorCode.NOT_PRIMARY, 409],
    ["reinit", ErrorCode.NO_PRIMARY_IN_SIGHT, 409],
    ["pause", ErrorCode.NOT_PRIMARY, 409],
  ] as const)("%s refused with %s answers its name and status %s", async (action, code, status) => {
    const app = adminApp(TOKEN, { [action]: throwing(new VgpuError(code, "why it was refused")) });
    const r = await app.inject({ method: "POST", url: `/v1/${action}`, headers: auth });
    expect(r.statusCode).toBe(status);
    expect(r.json()).toEqual({
      error: `${action}_refused`,
      code: ErrorCode[code],
      message: "why it was refused",
    });
  });

  it("answers the catalogue's description when the refusal has no message of its own", async () => {
    const app = adminApp(TOKEN, {
      switchover: throwing(new VgpuError(ErrorCode.SWITCHOVER_IN_PROGRESS)),
    });
    const r = await app.inject({ method: "POST", url: "/v1/switchover", headers: auth });
    expect(r.json()).toEqual({
      error: "switchover_refused",
      code: "SWITCHOVER_IN_PROGRESS",
      message: "a switchover is already in progress",
    });
  });

  it("keeps a node's OpsRefusal status and code; an error that is no refusal is a 500", async () => {
    const opsRefusal = Object.assign(new Error("not a standby"), { status: 409, code: "X_Y" });
    const app = adminApp(TOKEN, {
      reinit: throwing(opsRefusal),
      resume: throwing(new Error("disk full")),
    });
    const reinit = await app.inject({ method: "POST", url: "/v1/reinit", headers: auth });
    expect([reinit.statusCode, reinit.json()]).toEqual([
      409,
      { error: "reinit_refused", code: "X_Y", message: "not a standby" },
    ]);
    const resume = await app.inject({ method: "POST", url: "/v1/resume", headers: auth });
    expect([resume.statusCode, resume.json()]).toEqual([
      500,
      { error: "resume_refused", message: "disk full" },
    ]);
  });
});

describe("ops refusals: the endpoints' own", () => {
  it("401 UNAUTHENTICATED for a wrong token, 403 ADMIN_DISABLED without one configured", async () => {
    const wrong = await adminApp(TOKEN).inject({
      method: "POST",
      url: "/v1/promote",
      headers: { authorization: "Bearer nope" },
    });
    expect([wrong.statusCode, wrong.json().code]).toEqual([401, "UNAUTHENTICATED"]);
    const off = await adminApp(undefined).inject({ method: "POST", url: "/v1/promote" });
    expect([off.statusCode, off.json().code]).toEqual([403, "ADMIN_DISABLED"]);
  });

  it("verify: NOT_PRIMARY where it cannot run, the role's code when it is refused", async () => {
    const none = await adminApp(TOKEN).inject({ method: "POST", url: "/v1/verify", headers: auth });
    expect([none.statusCode, none.json().code]).toEqual([409, "NOT_PRIMARY"]);
    const app = adminApp(TOKEN, {
      verify: throwing(new VgpuError(ErrorCode.NO_STANDBY_IN_SYNC)),
    });
    const r = await app.inject({ method: "POST", url: "/v1/verify", headers: auth });
    expect([r.statusCode, r.json()]).toEqual([
      409,
      {
        error: "verify_failed",
        code: "NO_STANDBY_IN_SYNC",
        message: "no standby in sync to compare with",
      },
    ]);
  });

  it("sessions close: NOT_PRIMARY on a standby or when refused, 404 UNKNOWN_SESSION", async () => {
    const post = (app: ReturnType<typeof adminApp>, id: string) =>
      app.inject({ method: "POST", url: `/v1/sessions/${id}/close`, headers: auth });
    const standby = await post(adminApp(TOKEN), "s1");
    expect([standby.statusCode, standby.json().code]).toEqual([409, "NOT_PRIMARY"]);
    const primary = adminApp(TOKEN, {
      closeSession: async (id) => {
        if (id === "busy") throw new VgpuError(ErrorCode.NOT_PRIMARY, "handing over");
        return undefined;
      },
    });
    const busy = await post(primary, "busy");
    expect([busy.statusCode, busy.json()]).toEqual([
      409,
      { error: "close_refused", code: "NOT_PRIMARY", message: "handing over" },
    ]);
    const unknown = await post(primary, "s9");
    expect([unknown.statusCode, unknown.json()]).toEqual([
      404,
      { error: "unknown_session", code: "UNKNOWN_SESSION", message: "no session s9" },
    ]);
  });
});

describe("refusal helpers", () => {
  it("maps codes to statuses (409 unless listed) and keeps a VgpuError's code when wrapping", () => {
    expect(httpStatusOf(ErrorCode.PRIMARY_LEASED)).toBe(409);
    expect(httpStatusOf(ErrorCode.ADMIN_DISABLED)).toBe(403);
    expect(codeOr(new VgpuError(ErrorCode.STANDBY_TIMED_OUT), ErrorCode.HANDOVER_FAILED)).toBe(
      ErrorCode.STANDBY_TIMED_OUT,
    );
    expect(codeOr(new Error("x"), ErrorCode.HANDOVER_FAILED)).toBe(ErrorCode.HANDOVER_FAILED);
    expect(refusalOf("a string")).toEqual({ status: 500, message: "a string" });
  });
});
