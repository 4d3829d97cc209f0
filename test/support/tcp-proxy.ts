// A loopback TCP proxy for the replication link: the primary dials the proxy's fixed address,
// the proxy forwards to whichever standby is current (or refuses while there is none), and a
// test can cut every live connection at once without restarting either node.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export class TcpProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private target: { host: string; port: number } | undefined;
  /** Connections accepted and forwarded so far. */
  accepted = 0;
  address = "";

  private constructor(server: Server) {
    this.server = server;
  }

  /** Listens on 127.0.0.1 on a free port; `target` is host:port, or none yet. */
  static async start(target?: string): Promise<TcpProxy> {
    const proxy = new TcpProxy(createServer((client) => proxy.accept(client)));
    proxy.setTarget(target);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once("error", reject);
      proxy.server.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = proxy.server.address() as { port: number };
    proxy.address = `127.0.0.1:${port}`;
    return proxy;
  }

  /** Where new connections go from now on; undefined refuses them (closes at once). */
  setTarget(target: string | undefined): void {
    if (target === undefined) {
      this.target = undefined;
      return;
    }
    const i = target.lastIndexOf(":");
    this.target = { host: target.slice(0, i), port: Number(target.slice(i + 1)) };
  }

  /** Connections open now (each counts its two sockets once). */
  get open(): number {
    return this.sockets.size / 2;
  }

  /** Destroys every live connection; the proxy keeps listening, so the primary redials. */
  breakAll(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    this.breakAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const target = this.target;
    if (target === undefined) {
      client.destroy();
      return;
    }
    this.accepted++;
    const upstream = createConnection(target);
    const pair = [client, upstream];
    for (const s of pair) {
      this.sockets.add(s);
      s.setNoDelay(true);
      // Either side ending or failing ends both: the other node sees the link break.
      const end = () => {
        for (const t of pair) {
          t.destroy();
          this.sockets.delete(t);
        }
      };
      s.on("error", end);
      s.on("close", end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
