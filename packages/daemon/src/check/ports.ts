// `vgpud --check`: can this host bind every listener of the config now? Each address is bound
// and released at once; a port in use, an address not on this host or a privileged port is a
// problem naming the field. (At start the node binds them for real; this finds it earlier.)
import { createServer } from "node:net";
import { type Config, ConfigError } from "@vgpu-ha/common";
import { splitHostPort } from "../node-helpers.js";

const WHY: Record<string, string> = {
  EADDRINUSE: "in use on this host",
  EADDRNOTAVAIL: "not an address of this host",
  EACCES: "needs privileges to bind (a port below 1024)",
  ENOTFOUND: "the host name does not resolve",
  EAI_AGAIN: "the host name does not resolve",
};

function tryBind(address: string): Promise<string | null> {
  const [host, port] = splitHostPort(address);
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (e: NodeJS.ErrnoException) =>
      resolve(WHY[e.code ?? ""] ?? `cannot bind: ${e.code ?? e.message}`),
    );
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(null)));
  });
}

/** The listeners a node binds, by field (a standalone node has no replication port). */
export const listeners = (config: Config): Record<string, string> => ({
  "guest.listen": config.guest.listen,
  "ops.listen": config.ops.listen,
  ...(config.role !== "standalone" ? { "replication.listen": config.replication.listen } : {}),
});

/** Throws a ConfigError naming every listener that cannot be bound now. */
export async function checkPortsFree(config: Config): Promise<void> {
  const problems: string[] = [];
  for (const [field, address] of Object.entries(listeners(config))) {
    const why = await tryBind(address);
    if (why !== null) problems.push(`config: ${field} = ${JSON.stringify(address)}: ${why}`);
  }
  if (problems.length > 0) throw new ConfigError(problems.join("\n"));
}
