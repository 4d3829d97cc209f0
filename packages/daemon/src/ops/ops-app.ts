// The ops HTTP server, built and not started (the daemon calls listen; tests call inject()).
// Small encapsulated plugins: health, readiness, metrics, status, digest, and admin actions.
// Admin actions need `Authorization: Bearer <ops.token>` (compared in constant time: both sides
// hashed to 32 bytes first, so neither the content nor the length of the given token shows in
// the timing); without a configured token they are disabled (403), never open. The token is
// checked before any body is parsed. Every answer is JSON, errors as {error, message}: unknown
// route 404, unparsable body 400, too large 413, wrong content type 415, refusal 409.
import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from "fastify";
import type { Registry } from "prom-client";

export interface Readiness {
  readonly ready: boolean;
  readonly reason: string;
}

export interface AdminActions {
  /** Compares both nodes' digests at one seq (the primary asks its standby). */
  verify?(): Promise<Record<string, unknown>>;
  /** Test-only fault injection (testing.faultInjection). */
  corrupt?(): Record<string, unknown> | undefined;
  /** Test-only: blocks the main event loop for `ms` (a stalled-but-alive node). */
  stall?(ms: number): Record<string, unknown>;
  promote?(force: boolean): Promise<Record<string, unknown>>;
  demote?(force: boolean): Promise<Record<string, unknown>>;
  switchover?(): Promise<Record<string, unknown>>;
}

/** An error with an HTTP status (a refusal with a reason). */
interface StatusError {
  readonly status?: number;
  readonly message: string;
  /** A stable code from the error catalogue (e.g. PRIMARY_LEASED). */
  readonly code?: string;
}

const forceOf = (query: unknown) => (query as { force?: string } | undefined)?.force === "true";

export interface OpsDeps {
  /** A JSON-serialisable snapshot of the node's state. */
  status(): Record<string, unknown>;
  readiness(): Readiness;
  /** This node's state digest and the seq it is at. */
  digest?(): Record<string, unknown> | undefined;
  readonly registry: Registry;
  readonly adminToken?: string | undefined;
  readonly admin?: AdminActions;
}

const health: FastifyPluginAsync = async (app) => {
  app.get("/healthz", async () => ({ ok: true }));
};

const ready =
  (deps: OpsDeps): FastifyPluginAsync =>
  async (app) => {
    app.get("/readyz", async (_req, reply) => {
      const r = deps.readiness();
      return reply.code(r.ready ? 200 : 503).send(r);
    });
  };

const metrics =
  (deps: OpsDeps): FastifyPluginAsync =>
  async (app) => {
    app.get("/metrics", async (_req, reply) => {
      const body = await deps.registry.metrics();
      return reply.type(deps.registry.contentType).send(body);
    });
  };

const status =
  (deps: OpsDeps): FastifyPluginAsync =>
  async (app) => {
    app.get("/v1/status", async () => deps.status());
    app.get("/v1/digest", async (_req, reply) => {
      const d = deps.digest?.();
      return d ? d : reply.code(409).send({ error: "no_state", message: "no replica state yet" });
    });
  };

const sha = (s: string) => createHash("sha256").update(s).digest();

const admin =
  (deps: OpsDeps): FastifyPluginAsync =>
  async (app) => {
    const expected = deps.adminToken ? sha(deps.adminToken) : undefined;
    app.addHook("onRequest", async (req, reply) => {
      if (expected === undefined) {
        return reply
          .code(403)
          .send({ error: "admin_disabled", message: "no ops.token configured" });
      }
      const header = req.headers.authorization ?? "";
      const given = header.startsWith("Bearer ") ? header.slice(7) : "";
      if (!timingSafeEqual(sha(given), expected)) {
        return reply.code(401).send({ error: "unauthorized", message: "wrong or missing token" });
      }
    });
    app.post("/v1/verify", async (_req, reply) => {
      if (!deps.admin?.verify) {
        return reply
          .code(409)
          .send({ error: "not_primary", message: "verify runs on the primary" });
      }
      try {
        return await deps.admin.verify();
      } catch (e) {
        return reply.code(409).send({ error: "verify_failed", message: (e as Error).message });
      }
    });
    const action =
      (name: string, run: (force: boolean) => Promise<Record<string, unknown>> | undefined) =>
      async (
        req: { query: unknown },
        reply: { code(n: number): { send(b: unknown): unknown } },
      ) => {
        const running = run(forceOf(req.query));
        if (!running)
          return reply.code(404).send({ error: "not_found", message: `no ${name} here` });
        try {
          return await running;
        } catch (e) {
          const err = e as StatusError;
          return reply.code(err.status ?? 500).send({
            error: `${name}_refused`,
            ...(err.code !== undefined ? { code: err.code } : {}),
            message: err.message,
          });
        }
      };
    app.post(
      "/v1/promote",
      action("promote", (f) => deps.admin?.promote?.(f)),
    );
    app.post(
      "/v1/demote",
      action("demote", (f) => deps.admin?.demote?.(f)),
    );
    app.post(
      "/v1/switchover",
      action("switchover", () => deps.admin?.switchover?.()),
    );
    app.post("/v1/test/stall", async (req, reply) => {
      if (!deps.admin?.stall) {
        return reply.code(404).send({ error: "not_found", message: "fault injection is off" });
      }
      const ms = Number((req.query as { ms?: string } | undefined)?.ms ?? 1000);
      if (!(ms >= 0 && ms <= 60_000)) {
        return reply.code(400).send({ error: "bad_request", message: "ms must be 0..60000" });
      }
      // Answer first, then stall: the caller learns the stall began.
      setTimeout(() => deps.admin?.stall?.(ms), 0);
      return { stallingMs: ms };
    });
    app.post("/v1/test/corrupt", async (_req, reply) => {
      if (!deps.admin?.corrupt) {
        return reply.code(404).send({ error: "not_found", message: "fault injection is off" });
      }
      const done = deps.admin.corrupt();
      return done
        ? done
        : reply.code(409).send({ error: "no_state", message: "nothing to corrupt" });
    });
  };

/** No endpoint reads a body; anything larger than this is refused unread (413). */
const BODY_LIMIT_BYTES = 64 * 1024;

/** fastify's own errors (bad JSON, too large, unsupported type) in the {error, message} shape. */
const errorName = (status: number) =>
  status === 413
    ? "payload_too_large"
    : status === 415
      ? "unsupported_media_type"
      : status < 500
        ? "bad_request"
        : "internal_error";

export function buildOpsApp(deps: OpsDeps): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT_BYTES });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: "not_found", message: `no route ${req.method} ${req.url}` }),
  );
  app.setErrorHandler((err: { statusCode?: number; message: string }, _req, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 ? err.statusCode : 500;
    return reply.code(status).send({ error: errorName(status), message: err.message });
  });
  app.register(health);
  app.register(ready(deps));
  app.register(metrics(deps));
  app.register(status(deps));
  app.register(admin(deps));
  return app;
}
