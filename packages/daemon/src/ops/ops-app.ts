// The ops HTTP server, built and not started (the daemon calls listen; tests call inject()).
// Small encapsulated plugins: /healthz, /readyz, /metrics, /v1/status.
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from "fastify";
import type { Registry } from "prom-client";

export interface Readiness {
  readonly ready: boolean;
  readonly reason: string;
}

export interface OpsDeps {
  /** A JSON-serialisable snapshot of the node's state. */
  status(): Record<string, unknown>;
  readiness(): Readiness;
  readonly registry: Registry;
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
  };

export function buildOpsApp(deps: OpsDeps): FastifyInstance {
  const app = Fastify({ logger: false });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: "not_found", message: `no route ${req.method} ${req.url}` }),
  );
  app.register(health);
  app.register(ready(deps));
  app.register(metrics(deps));
  app.register(status(deps));
  return app;
}
