// Proves the ops app's routes with inject() (no listening socket): health, readiness with its
// reason, Prometheus text, status JSON, and a JSON 404 for unknown routes.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { buildOpsApp } from "./ops-app.js";

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
