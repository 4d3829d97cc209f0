// The ops HTTP server, built and not started (the daemon calls listen; tests call inject()).
// Small encapsulated plugins: health, readiness, metrics, status, digest, and admin actions.
// Admin actions need `Authorization: Bearer <ops.token>` (compared in constant time: both sides
// hashed to 32 bytes first, so neither the content nor the length of the given token shows in
// the timing); without a configured token they are disabled (403), never open. The token is
// checked before any body is parsed. No action reads a body: an empty one is accepted whatever
// its content type (`curl -d ''`). Every answer is JSON, errors as {error, message} and, for a
// refusal, a stable `code` from the error catalogue with its HTTP status (refusal.ts: 409 but
// for UNAUTHENTICATED 401, ADMIN_DISABLED 403, UNKNOWN_SESSION 404, STANDBY_TIMED_OUT 504);
// unknown route 404, unparsable JSON body 400, too large 413, a non-empty body of another type
// 415, an action that failed otherwise 500 (no code).
import { createHash, timingSafeEqual } from "node:crypto";
import { ErrorCode } from "@vgpu-ha/common/core";
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyReply } from "fastify";
import type { Registry } from "prom-client";
import { type Refusal, refusal, refusalOf } from "./refusal.js";

export interface Readiness {
  readonly ready: boolean;
  readonly reason: string;
}

/** An admin action: `force` from `?force=true`, `caller` says who asked (for the history). */
export type AdminAction = (force: boolean, caller: string) => Promise<Record<string, unknown>>;

export interface AdminActions {
  /** Compares both nodes' digests at one seq (the primary asks its standby). */
  verify?(): Promise<Record<string, unknown>>;
  /** Test-only fault injection (testing.faultInjection). */
  corrupt?(): Record<string, unknown> | undefined;
  /** Test-only: blocks the main event loop for `ms` (a stalled-but-alive node). */
  stall?(ms: number): Record<string, unknown>;
  promote?: AdminAction;
  demote?: AdminAction;
  switchover?: AdminAction;
  /** Maintenance mode on / off. */
  pause?: AdminAction;
  resume?: AdminAction;
  /** A standby drops its replica and takes a fresh snapshot. */
  reinit?: AdminAction;
  /** The guest sessions this node holds, of one tenant when given. */
  sessions?(tenant: string | undefined): Record<string, unknown>;
  /**
   * Ends a guest session through the log (`by`: the caller's address); undefined when there is
   * no such session. Throws a VgpuError to refuse (NOT_PRIMARY: 409).
   */
  closeSession?(id: string, by: string): Promise<Record<string, unknown> | undefined>;
}

/** One admin request, for the node's log: who asked what, and the answer's status. */
export interface AdminAudit {
  readonly method: string;
  readonly url: string;
  readonly remote: string;
  readonly status: number;
}

/** Answers a refusal (or a failure) as {error, code, message} with its status. */
const refuse = (reply: FastifyReply, error: string, r: Refusal) =>
  reply.code(r.status).send({ error, ...(r.code ? { code: r.code } : {}), message: r.message });

const forceOf = (query: unknown) => (query as { force?: string } | undefined)?.force === "true";

export interface OpsDeps {
  /** A JSON-serialisable snapshot of the node's state. */
  status(): Record<string, unknown>;
  /** This node's role changes, oldest first. */
  history?(): readonly unknown[];
  readiness(): Readiness;
  /** This node's state digest and the seq it is at. */
  digest?(): Promise<Record<string, unknown> | undefined>;
  readonly registry: Registry;
  readonly adminToken?: string | undefined;
  readonly admin?: AdminActions;
  /** Called after every request to an admin endpoint (refused ones too). */
  audit?(entry: AdminAudit): void;
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
    app.get("/v1/history", async () => ({ changes: deps.history?.() ?? [] }));
    app.get("/v1/digest", async (_req, reply) => {
      const d = await deps.digest?.();
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
        return refuse(
          reply,
          "admin_disabled",
          refusal(ErrorCode.ADMIN_DISABLED, "no ops.token configured"),
        );
      }
      const header = req.headers.authorization ?? "";
      const given = header.startsWith("Bearer ") ? header.slice(7) : "";
      if (!timingSafeEqual(sha(given), expected)) {
        return refuse(
          reply,
          "unauthorized",
          refusal(ErrorCode.UNAUTHENTICATED, "wrong or missing token"),
        );
      }
    });
    app.addHook("onResponse", async (req, reply) => {
      deps.audit?.({ method: req.method, url: req.url, remote: req.ip, status: reply.statusCode });
    });
    app.get("/v1/sessions", async (req, reply) => {
      if (!deps.admin?.sessions) {
        return reply.code(404).send({ error: "not_found", message: "no sessions here" });
      }
      const tenant = (req.query as { tenant?: unknown } | undefined)?.tenant;
      if (tenant !== undefined && typeof tenant !== "string") {
        return reply.code(400).send({ error: "bad_request", message: "tenant: one name" });
      }
      return deps.admin.sessions(tenant);
    });
    app.post("/v1/sessions/:id/close", async (req, reply) => {
      const { id } = req.params as { id: string };
      const close = deps.admin?.closeSession;
      if (!close) {
        const r = refusal(ErrorCode.NOT_PRIMARY, "sessions close on the primary");
        return refuse(reply, "not_primary", r);
      }
      try {
        const done = await close(id, req.ip);
        if (done) return done;
        return refuse(
          reply,
          "unknown_session",
          refusal(ErrorCode.UNKNOWN_SESSION, `no session ${id}`),
        );
      } catch (e) {
        return refuse(reply, "close_refused", refusalOf(e));
      }
    });
    app.post("/v1/verify", async (_req, reply) => {
      if (!deps.admin?.verify) {
        return refuse(
          reply,
          "not_primary",
          refusal(ErrorCode.NOT_PRIMARY, "verify runs on the primary"),
        );
      }
      try {
        return await deps.admin.verify();
      } catch (e) {
        return refuse(reply, "verify_failed", refusalOf(e));
      }
    });
    const actions = ["promote", "demote", "switchover", "pause", "resume", "reinit"] as const;
    for (const name of actions) {
      app.post(`/v1/${name}`, async (req, reply) => {
        const run = deps.admin?.[name];
        if (!run) return reply.code(404).send({ error: "not_found", message: `no ${name} here` });
        try {
          return await run(forceOf(req.query), `operator ${req.ip}`);
        } catch (e) {
          return refuse(reply, `${name}_refused`, refusalOf(e));
        }
      });
    }
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

/**
 * No endpoint reads a body. An empty one passes whatever its content type (`curl -d ''` sends
 * application/x-www-form-urlencoded); a non-empty one must be JSON that parses.
 */
function acceptEmptyBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (req, body, done) => {
    const text = body as string;
    if (text.length === 0) return done(null, undefined);
    if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
      return done(Object.assign(new Error("only an empty or a JSON body"), { statusCode: 415 }));
    }
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(Object.assign(e as Error, { statusCode: 400 }));
    }
  });
}

export function buildOpsApp(deps: OpsDeps): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT_BYTES });
  acceptEmptyBodies(app);
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
