// Proves the ops app's routes with inject() (no listening socket): health, readiness with its
// reason, Prometheus text, status JSON, and bad input: a JSON 404 for unknown routes, 400 for an
// unparsable body, 401 for a wrong or missing token (checked before the body is read), 403 when
// no token is configured, 409 with the reason and stable code when an action is refused; an
// empty body passes whatever its content type; the caller's address reaches the action; the
// sessions list and close (404 for an unknown id), and the audit of every admin request with
// the caller's address.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { type AdminActions, buildOpsApp } from "./ops-app.js";
import { testAdminApp } from "./test-ops-app.js";

function app(ready: boolean) {
  const registry = new Registry();
  registry.setDefaultLabels({});
  return buildOpsApp({
    registry,
    status: () => ({ role: "standalone", epoch: 1 }),
    readiness: () => ({ ready, reason: ready ? "serving" : "starting" }),
  });
}

describe("ops app", () => {
  it("answers /healthz", async () => {
    const r = await app(true).inject({ url: "/healthz" });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ ok: true });
  });

  it("answers /readyz 200 when ready and 503 with the reason when not", async () => {
    expect((await app(true).inject({ url: "/readyz" })).statusCode).toBe(200);
    const r = await app(false).inject({ url: "/readyz" });
    expect(r.statusCode).toBe(503);
    expect(r.json()).toEqual({ ready: false, reason: "starting" });
  });

  it("serves metrics in the Prometheus text format", async () => {
    const r = await app(true).inject({ url: "/metrics" });
    expect(r.statusCode).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/plain/);
  });

  it("serves status JSON", async () => {
    expect((await app(true).inject({ url: "/v1/status" })).json()).toEqual({
      role: "standalone",
      epoch: 1,
    });
  });

  it("answers unknown routes with a JSON 404", async () => {
    const r = await app(true).inject({ url: "/nope" });
    expect(r.statusCode).toBe(404);
    expect(r.json()).toMatchObject({ error: "not_found" });
  });
});

const TOKEN = "ops-token-for-unit-tests";
const auth = { authorization: `Bearer ${TOKEN}` };

/** An app with admin actions that record what ran. */
const adminApp = testAdminApp;

/** An error as node.ts throws it: OpsRefusal carries the HTTP status. */
const refusal = (status: number, message: string) => Object.assign(new Error(message), { status });

describe("ops app: admin and bad input", () => {
  it("runs an action with the right token", async () => {
    const calls: boolean[] = [];
    const app = adminApp(TOKEN, {
      promote: async (force) => {
        calls.push(force);
        return { role: "primary", epoch: 2 };
      },
    });
    const r = await app.inject({ method: "POST", url: "/v1/promote?force=true", headers: auth });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ role: "primary", epoch: 2 });
    expect(calls).toEqual([true]);
  });

  it.each([
    ["no header", {}],
    ["a wrong token", { authorization: "Bearer not-the-token" }],
    ["the token with a suffix", { authorization: `Bearer ${TOKEN}x` }],
    ["a prefix of the token", { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
    ["another scheme", { authorization: `Basic ${TOKEN}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ])("answers 401 for %s, and the action does not run", async (_what, headers) => {
    let ran = false;
    const app = adminApp(TOKEN, {
      switchover: async () => {
        ran = true;
        return {};
      },
    });
    const r = await app.inject({ method: "POST", url: "/v1/switchover", headers });
    expect(r.statusCode).toBe(401);
    expect(r.json()).toMatchObject({ error: "unauthorized" });
    expect(ran).toBe(false);
  });

  it("answers 403 to every admin action when no token is configured, even with one given", async () => {
    const app = adminApp(undefined, { promote: async () => ({}) });
    for (const url of ["/v1/promote", "/v1/demote", "/v1/switchover", "/v1/verify"]) {
      const r = await app.inject({ method: "POST", url, headers: auth });
      expect(r.statusCode, url).toBe(403);
      expect(r.json()).toMatchObject({ error: "admin_disabled" });
    }
  });

  it("answers 400 with JSON to an unparsable JSON body, after the token check", async () => {
    const app = adminApp(TOKEN, { demote: async () => ({ role: "standby" }) });
    const bad = { method: "POST" as const, url: "/v1/demote", payload: "{not json" };
    const json = { "content-type": "application/json" };
    const r = await app.inject({ ...bad, headers: { ...json, ...auth } });
    expect(r.statusCode).toBe(400);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    expect(r.json()).toMatchObject({ error: "bad_request" });
    expect(r.json().message).toMatch(/JSON/i);
    const unauthenticated = await app.inject({ ...bad, headers: json });
    expect(unauthenticated.statusCode).toBe(401);
  });

  it("refuses a body larger than 64 KiB with 413", async () => {
    const app = adminApp(TOKEN, { demote: async () => ({}) });
    const r = await app.inject({
      method: "POST",
      url: "/v1/demote",
      headers: { ...auth, "content-type": "application/json" },
      payload: JSON.stringify({ pad: "x".repeat(70_000) }),
    });
    expect(r.statusCode).toBe(413);
    expect(r.json()).toMatchObject({ error: "payload_too_large" });
  });

  it("answers 409 with the reason when a promote is refused (an ineligible standby)", async () => {
    const app = adminApp(TOKEN, {
      promote: async () => {
        throw refusal(409, "standby is snapshot: not promoting (force to override)");
      },
    });
    const r = await app.inject({ method: "POST", url: "/v1/promote", headers: auth });
    expect(r.statusCode).toBe(409);
    expect(r.json()).toEqual({
      error: "promote_refused",
      message: "standby is snapshot: not promoting (force to override)",
    });
  });

  it("answers 409 to verify on a node that cannot verify, 404 to an action it lacks", async () => {
    const app = adminApp(TOKEN, {});
    const v = await app.inject({ method: "POST", url: "/v1/verify", headers: auth });
    expect(v.statusCode).toBe(409);
    expect(v.json()).toMatchObject({ error: "not_primary" });
    const d = await app.inject({ method: "POST", url: "/v1/demote", headers: auth });
    expect(d.statusCode).toBe(404);
    expect(d.json()).toMatchObject({ error: "not_found" });
  });

  it.each([
    ["curl -d ''", { "content-type": "application/x-www-form-urlencoded" }],
    ["an empty JSON body", { "content-type": "application/json" }],
    ["text/plain", { "content-type": "text/plain" }],
    ["no content type", {}],
  ])("accepts an empty body sent as %s", async (_what, headers) => {
    const app = adminApp(TOKEN, { pause: async () => ({ paused: true }) });
    const r = await app.inject({
      method: "POST",
      url: "/v1/pause",
      headers: { ...auth, ...headers },
      payload: "",
    });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ paused: true });
  });

  it("refuses a non-empty body that is not JSON with 415", async () => {
    const app = adminApp(TOKEN, { resume: async () => ({}) });
    const r = await app.inject({
      method: "POST",
      url: "/v1/resume",
      headers: { ...auth, "content-type": "text/plain" },
      payload: "hello",
    });
    expect(r.statusCode).toBe(415);
    expect(r.json()).toMatchObject({ error: "unsupported_media_type" });
  });

  it("hands the caller's address to the action and answers a typed refusal", async () => {
    const callers: string[] = [];
    const app = adminApp(TOKEN, {
      reinit: async (_force, caller) => {
        callers.push(caller);
        throw Object.assign(refusal(409, "reinit runs on a standby"), { code: "NOT_STANDBY" });
      },
    });
    const r = await app.inject({
      method: "POST",
      url: "/v1/reinit",
      headers: auth,
      remoteAddress: "10.1.2.3",
    });
    expect(r.statusCode).toBe(409);
    expect(r.json()).toEqual({
      error: "reinit_refused",
      code: "NOT_STANDBY",
      message: "reinit runs on a standby",
    });
    expect(callers).toEqual(["operator 10.1.2.3"]);
  });

  it("serves the node's role history", async () => {
    const app = buildOpsApp({
      registry: new Registry(),
      status: () => ({}),
      history: () => [{ epoch: 1, to: "primary" }],
      readiness: () => ({ ready: true, reason: "" }),
    });
    const r = await app.inject({ url: "/v1/history" });
    expect(r.json()).toEqual({ changes: [{ epoch: 1, to: "primary" }] });
  });

  it("answers a wrong method on a known path with a JSON 404", async () => {
    const r = await adminApp(TOKEN).inject({ method: "DELETE", url: "/v1/status" });
    expect(r.statusCode).toBe(404);
    expect(r.json()).toMatchObject({ error: "not_found", message: "no route DELETE /v1/status" });
  });
});

describe("ops app: guest sessions", () => {
  const sessions = [{ tenant: "a", id: "s1" }];
  const admin: AdminActions = {
    sessions: (tenant) => ({
      sessions: sessions.filter((s) => tenant === undefined || s.tenant === tenant),
    }),
    closeSession: async (id, by) => {
      if (id === "busy") throw refusal(409, "this node does not serve guests now");
      return id === "s1" ? { id, by } : undefined;
    },
  };

  it("lists sessions, filtered by tenant, only with the token", async () => {
    const a = adminApp(TOKEN, admin);
    expect((await a.inject({ url: "/v1/sessions" })).statusCode).toBe(401);
    expect((await a.inject({ url: "/v1/sessions", headers: auth })).json()).toEqual({ sessions });
    const none = await a.inject({ url: "/v1/sessions?tenant=b", headers: auth });
    expect(none.json()).toEqual({ sessions: [] });
    const two = await a.inject({ url: "/v1/sessions?tenant=a&tenant=b", headers: auth });
    expect(two.statusCode).toBe(400);
  });

  it("closes a session by id: 200, 404 for an unknown one, 409 when refused", async () => {
    const a = adminApp(TOKEN, admin);
    const post = (id: string) =>
      a.inject({ method: "POST", url: `/v1/sessions/${id}/close`, headers: auth });
    const done = await post("s1");
    expect(done.statusCode).toBe(200);
    expect(done.json()).toEqual({ id: "s1", by: "127.0.0.1" });
    expect((await post("s2")).json()).toMatchObject({ error: "unknown_session" });
    expect((await post("s2")).statusCode).toBe(404);
    const busy = await post("busy");
    expect(busy.statusCode).toBe(409);
    expect(busy.json()).toMatchObject({ message: "this node does not serve guests now" });
  });

  it("reports every admin request, refused ones too, with the caller's address", async () => {
    const seen: unknown[] = [];
    const a = buildOpsApp({
      registry: new Registry(),
      status: () => ({}),
      readiness: () => ({ ready: true, reason: "" }),
      adminToken: TOKEN,
      admin,
      audit: (e) => seen.push(e),
    });
    await a.inject({ method: "POST", url: "/v1/sessions/s1/close", headers: auth });
    await a.inject({ url: "/v1/sessions" });
    await a.inject({ url: "/v1/status" });
    expect(seen).toEqual([
      { method: "POST", url: "/v1/sessions/s1/close", remote: "127.0.0.1", status: 200 },
      { method: "GET", url: "/v1/sessions", remote: "127.0.0.1", status: 401 },
    ]);
  });
});
