// A loopback TCP proxy for the replication link: the primary dials the proxy's fixed address,
// the proxy forwards to whichever standby is current (or refuses while there is none), and a
// test can cut every live connection at once without restarting either node. For the chaos
// harness on loopback it can also delay the bytes of one or both directions (delay ± jitter,
// order kept) and blackhole a direction (its bytes are dropped; heal() then breaks the
// connections that lost bytes, as TCP over a lossy path would eventually reset them).
import { createConnection, createServer, type Server, type Socket } from "node:net";

/** client→upstream ("up") or upstream→client ("down"). */
export type ProxyDirection = "up" | "down";

export class TcpProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private target: { host: string; port: number } | undefined;
  private readonly dropping = { up: false, down: false };
  private delay = { ms: 0, jitterMs: 0 };
  /** Connections that dropped bytes while a direction was blackholed. */
  private readonly damaged = new Set<Socket>();
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

  /** Drops the bytes of `direction` on every connection (new ones too) until heal(). */
  blackhole(direction: ProxyDirection): void {
    this.dropping[direction] = true;
  }

  /** Forwards both directions again and breaks the connections that lost bytes. */
  heal(): void {
    this.dropping.up = false;
    this.dropping.down = false;
    for (const s of this.damaged) s.destroy();
    this.damaged.clear();
  }

  /** Delays every chunk by ms ± jitterMs (never reordering); 0 forwards at once. */
  setDelay(ms: number, jitterMs = 0): void {
    this.delay = { ms, jitterMs };
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
    this.forward(client, upstream, "up");
    this.forward(upstream, client, "down");
  }

  private forward(from: Socket, to: Socket, direction: ProxyDirection): void {
    let dueMs = 0;
    from.on("data", (chunk: Buffer) => {
      if (this.dropping[direction]) {
        this.damaged.add(from);
        return;
      }
      const { ms, jitterMs } = this.delay;
      if (ms === 0 && jitterMs === 0 && dueMs <= performance.now()) {
        if (!to.write(chunk)) {
          from.pause();
          to.once("drain", () => from.resume());
        }
        return;
      }
      const now = performance.now();
      const wanted = now + Math.max(0, ms + (Math.random() * 2 - 1) * jitterMs);
      dueMs = Math.max(dueMs, wanted);
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, dueMs - now);
    });
    from.on("end", () => to.end());
  }
}
