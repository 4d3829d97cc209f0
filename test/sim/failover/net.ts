// The simulated network of a pair and its guests. Streams behave like gRPC over TCP: a stream
// opens (the server's handler runs) before anything sent on it arrives; ends close locally at
// once and the other end learns after the in-flight data. Between the two nodes, each message
// may also be lost, duplicated or held back (the existing simulator's link faults), and the
// nodes may be partitioned both ways or one way: what is sent across a cut waits (TCP keeps
// retrying) and arrives after it heals, unless the cut kills the streams (keepalive timeouts),
// and a stream cannot open across a cut. Guests reach both nodes over clean links; a guest's
// keepalive ping is answered by a node's process whenever it runs (paused: never).
import type { GuestLink, wire } from "@vgpu-ha/common";
import { SimLink } from "../network.js";
import type { NetworkParams } from "../params.js";
import type { SimRng } from "../rng.js";
import type { NodeName } from "./params.js";
import type { SimProcess } from "./process.js";
import type { World } from "./world.js";

/** One end of a stream, as a role or guest sees it (the Link interface of the daemon). */
export interface Endpoint<Out, In> {
  readonly id: number;
  readonly isOpen: boolean;
  send(message: Out): void;
  close(reason?: string): void;
  onMessage(handler: (message: In) => void): void;
  /** Called once when the stream ends for any reason, also on a local close. */
  onClose(handler: (reason: string) => void): void;
}

type Item<T> =
  | { readonly kind: "msg"; readonly message: T }
  | { readonly kind: "fin"; readonly reason: string }
  | { readonly kind: "open" }
  | { readonly kind: "ping" }
  | { readonly kind: "pong" };

/** One direction of a stream. */
class Pipe<T> {
  readonly held: Item<T>[] = [];
  to!: End<unknown, T>;
  pending = true;
  constructor(
    private readonly world: World,
    readonly link: SimLink,
    private readonly cut: () => boolean,
    private readonly label: string,
    private readonly dropped: () => void,
  ) {}

  transmit(item: Item<T>): void {
    if (this.pending || this.cut()) {
      this.held.push(item);
      return;
    }
    this.schedule(item);
  }

  schedule(item: Item<T>): void {
    const now = this.world.nowMs;
    const times = item.kind === "msg" ? this.link.deliveryTimes(now) : [this.link.inOrderTime(now)];
    if (times.length === 0) this.dropped();
    for (const t of times) this.world.at(t, this.label, () => this.to.arrive(item));
  }

  /** The stream opened or the cut healed: what waited goes out, in order. */
  flush(): void {
    this.pending = false;
    if (this.cut()) return;
    for (const item of this.held.splice(0)) this.schedule(item);
  }
}

export class End<Out, In> implements Endpoint<Out, In> {
  readonly id: number;
  readonly proc: SimProcess;
  readonly out: Pipe<Out>;
  open = true;
  /** The server side's handler has not run yet: what arrives waits for it. */
  accepted: boolean;
  private readonly early: In[] = [];
  /** The reader paused the stream (stream.pause()): what arrives waits. */
  private readingPaused = false;
  private readonly handlers: ((m: In) => void)[] = [];
  private readonly closeHandlers: ((reason: string) => void)[] = [];
  /** Called for each message sent (the checker's epoch check). */
  onSend: ((m: Out) => void) | undefined;
  /** Server side: runs when the stream opens (the gRPC handler). */
  onOpen: (() => void) | undefined;
  /** Guest side: the node answered a keepalive ping. */
  onPong: (() => void) | undefined;

  constructor(id: number, proc: SimProcess, out: Pipe<Out>, accepted: boolean) {
    this.id = id;
    this.proc = proc;
    this.out = out;
    this.accepted = accepted;
  }

  get isOpen(): boolean {
    return this.open;
  }

  send(message: Out): void {
    if (!this.open) return;
    this.onSend?.(message);
    this.out.transmit({ kind: "msg", message });
  }

  close(reason = "closed"): void {
    if (!this.open) return;
    this.out.transmit({ kind: "fin", reason });
    this.finish(reason);
  }

  /** stream.pause(): messages wait until resumeReading. */
  pauseReading(): void {
    this.readingPaused = true;
  }

  /** stream.resume(): what waited is read on a later tick, then new messages as they come. */
  resumeReading(): void {
    if (!this.readingPaused) return;
    this.readingPaused = false;
    this.proc.defer(() => {
      if (!this.open) return;
      for (const m of this.early.splice(0)) this.dispatch(m);
    });
  }

  ping(): void {
    if (this.open) this.out.transmit({ kind: "ping" });
  }

  onMessage(handler: (m: In) => void): void {
    this.handlers.push(handler);
  }

  onClose(handler: (reason: string) => void): void {
    this.closeHandlers.push(handler);
  }

  /** Ends this side without telling the other (its process died, or a keepalive gave up). */
  finish(reason: string): void {
    if (!this.open) return;
    this.open = false;
    for (const h of this.closeHandlers) h(reason);
  }

  /** An item of the other side arrives at this side's host. */
  arrive(item: Item<In>): void {
    if (!this.open) return;
    this.proc.deliver(() => {
      if (!this.open) return;
      switch (item.kind) {
        case "open":
          this.accepted = true;
          this.onOpen?.();
          for (const m of this.early.splice(0)) this.dispatch(m);
          return;
        case "msg":
          if (!this.accepted || this.readingPaused) this.early.push(item.message);
          else this.dispatch(item.message);
          return;
        case "fin":
          this.finish(item.reason);
          return;
        case "ping":
          // Answered by the gRPC library of a running process: the role is not involved.
          (this.out as Pipe<unknown>).transmit({ kind: "pong" });
          return;
        case "pong":
          this.onPong?.();
          return;
      }
    });
  }

  private dispatch(m: In): void {
    for (const h of this.handlers) {
      if (!this.open) return;
      h(m);
    }
  }
}

/**
 * A node's end of a guest stream as the guest service's GuestLink port. Its close ends the
 * stream (the guest sees the end after what was sent); the guest's close or a broken stream is
 * the link gone. Simulated guests never half-close.
 */
export function guestLink(end: End<wire.NodeMessage, wire.GuestMessage>): GuestLink {
  return {
    remote: `sim-guest-${end.id}`,
    certificateNames: [],
    get writable() {
      return end.isOpen;
    },
    send: (m) => end.send(m),
    end: () => end.close("closed by the node"),
    pause: () => end.pauseReading(),
    resume: () => end.resumeReading(),
    onMessage: (handler) => end.onMessage(handler),
    onEnd: () => undefined,
    onGone: (handler) => end.onClose(() => handler()),
  };
}

export interface Stream<A, B> {
  readonly client: End<A, B>;
  readonly server: End<B, A>;
}

const CLEAN: Omit<NetworkParams, "latencyMinMs" | "latencyMaxMs"> = {
  dropRate: 0,
  dupRate: 0,
  reorderRate: 0,
  reorderMaxMs: 0,
  disconnectsPerSec: 0,
  reconnectMaxMs: 0,
};

export interface NodeHost {
  /** The node's current process; undefined while it is down. */
  process(): SimProcess | undefined;
}

export class Network {
  private readonly world: World;
  private readonly params: NetworkParams;
  private readonly guestParams: NetworkParams;
  private readonly rng: SimRng;
  private nextId = 1;
  /** Directions cut now: "a>b" cuts what a sends to b. */
  private readonly cuts = new Set<string>();
  private readonly streams: {
    readonly client: End<unknown, unknown>;
    readonly server: End<unknown, unknown>;
    readonly between: readonly [string, string];
  }[] = [];
  /** Called when the link loses a message on its own (a network failure). */
  onDrop: (() => void) | undefined;
  /** The per-message faults are off (the network healed). */
  private healed = false;
  readonly stats = { dropped: 0, duplicated: 0, reordered: 0, refused: 0, dialTimeouts: 0 };
  private readonly links: SimLink[] = [];

  constructor(
    world: World,
    params: NetworkParams,
    guestLatencyMs: readonly [number, number],
    rng: SimRng,
  ) {
    this.world = world;
    this.params = params;
    this.guestParams = {
      ...CLEAN,
      latencyMinMs: guestLatencyMs[0],
      latencyMaxMs: guestLatencyMs[1],
    };
    this.rng = rng;
  }

  isCut(from: string, to: string): boolean {
    return this.cuts.has(`${from}>${to}`);
  }

  /**
   * Opens a stream from `client` (a process named `from`) to whatever process `to` runs. A
   * node that is down refuses at once; a cut in either direction keeps it from opening until
   * it heals or `timeoutMs` passes. `onServer` is the server's gRPC handler.
   */
  open<A, B>(
    from: { name: string; proc: SimProcess },
    to: { name: string; host: NodeHost },
    options: { timeoutMs: number; kind: "replication" | "probe" | "guest" },
    onServer: (server: End<B, A>) => void,
  ): End<A, B> {
    const between = [from.name, to.name] as const;
    const params = options.kind === "guest" ? this.guestParams : this.params;
    const id = this.nextId++;
    const faulty = options.kind === "replication";
    const up = this.link(params, faulty);
    const down = this.link(params, faulty);
    const dropped = () => this.onDrop?.();
    const upPipe = new Pipe<A>(
      this.world,
      up,
      () => this.isCut(from.name, to.name),
      `${from.name}>${to.name}`,
      dropped,
    );
    const downPipe = new Pipe<B>(
      this.world,
      down,
      () => this.isCut(to.name, from.name),
      `${to.name}>${from.name}`,
      dropped,
    );
    const client = new End<A, B>(id, from.proc, upPipe, true);
    const target = to.host.process();
    if (target === undefined) {
      this.stats.refused++;
      const rttMs = 2 * this.rng.real(params.latencyMinMs, params.latencyMaxMs);
      this.world.after(rttMs, `refused ${from.name}>${to.name}`, () =>
        client.arrive({ kind: "fin", reason: "connection refused" }),
      );
      return client;
    }
    const server = new End<B, A>(id, target, downPipe, false);
    upPipe.to = server as End<unknown, A>;
    downPipe.to = client as End<unknown, B>;
    server.onOpen = () => onServer(server);
    this.streams.push({
      client: client as End<unknown, unknown>,
      server: server as End<unknown, unknown>,
      between,
    });
    const establish = () => {
      if (!client.open && !server.open) return;
      upPipe.held.unshift({ kind: "open" });
      upPipe.flush();
      downPipe.flush();
    };
    const pending = { between, establish, done: false };
    if (!this.isCut(from.name, to.name) && !this.isCut(to.name, from.name)) {
      establish();
    } else {
      // Waits for the cut to heal (see uncut) or gives up.
      this.pendingOpens.push(pending);
      this.world.after(options.timeoutMs, `dial timeout ${from.name}>${to.name}`, () => {
        if (pending.done) return;
        pending.done = true;
        this.stats.dialTimeouts++;
        client.arrive({ kind: "fin", reason: "connect timeout" });
        server.open = false;
      });
    }
    return client;
  }

  private readonly pendingOpens: {
    readonly between: readonly [string, string];
    readonly establish: () => void;
    done: boolean;
  }[] = [];

  private link(params: NetworkParams, faulty: boolean): SimLink {
    const link = new SimLink(faulty ? params : { ...params, ...CLEAN }, this.rng.fork(this.nextId));
    link.healed = this.healed;
    if (faulty) this.links.push(link);
    return link;
  }

  /** Cuts what `from` sends to `to`; `kill` also ends the streams across it (keepalive). */
  cut(from: NodeName, to: NodeName, kill: { afterMs: number } | undefined): void {
    this.cuts.add(`${from}>${to}`);
    if (kill === undefined) return;
    for (const s of this.liveStreams(from, to)) {
      for (const end of [s.client, s.server]) {
        this.world.after(this.rng.real(0.5, 1.5) * kill.afterMs, `keepalive ${from}|${to}`, () =>
          end.proc.deliver(() => end.finish("keepalive timeout")),
        );
      }
    }
  }

  /** Heals the cut of what `from` sends to `to`: what waited goes out, streams may open. */
  uncut(from: NodeName, to: NodeName): void {
    this.cuts.delete(`${from}>${to}`);
    for (const s of this.streams) {
      if (!s.client.open && !s.server.open && s.client.out.held.length === 0) continue;
      for (const end of [s.client, s.server]) {
        if (!end.out.pending) end.out.flush();
      }
    }
    const still: typeof this.pendingOpens = [];
    for (const p of this.pendingOpens) {
      if (p.done) continue;
      if (this.isCut(p.between[0], p.between[1]) || this.isCut(p.between[1], p.between[0])) {
        still.push(p);
        continue;
      }
      p.done = true;
      p.establish();
    }
    this.pendingOpens.length = 0;
    this.pendingOpens.push(...still);
    this.prune();
  }

  /** Breaks every stream between `x` and `y` (both ends see an error soon). */
  resetStreams(x: string, y: string): void {
    for (const s of this.liveStreams(x, y)) {
      for (const end of [s.client, s.server]) {
        this.world.after(this.rng.real(0, 2), "reset", () =>
          end.proc.deliver(() => end.finish("connection reset")),
        );
      }
    }
  }

  /** A process died: its ends are gone, the other ends learn it (a RST) after the latency. */
  killed(proc: SimProcess): void {
    for (const s of this.streams) {
      for (const mine of [s.client, s.server]) {
        if (mine.proc !== proc || !mine.open) continue;
        mine.open = false;
        mine.out.pending = false;
        mine.out.transmit({ kind: "fin", reason: "connection reset by peer" });
      }
    }
    this.prune();
  }

  /** Faults off for the rest of the run. */
  heal(): void {
    this.healed = true;
    for (const l of this.links) l.healed = true;
    this.uncut("a", "b");
    this.uncut("b", "a");
  }

  get linkStats(): { dropped: number; duplicated: number; reordered: number } {
    const out = { dropped: 0, duplicated: 0, reordered: 0 };
    for (const l of this.links) {
      out.dropped += l.stats.dropped;
      out.duplicated += l.stats.duplicated;
      out.reordered += l.stats.reordered;
    }
    return out;
  }

  private liveStreams(x: string, y: string) {
    return this.streams.filter(
      (s) =>
        (s.client.open || s.server.open) &&
        ((s.between[0] === x && s.between[1] === y) || (s.between[0] === y && s.between[1] === x)),
    );
  }

  private prune(): void {
    if (this.streams.length < 64) return;
    const live = this.streams.filter(
      (s) => s.client.open || s.server.open || s.client.out.held.length > 0,
    );
    this.streams.length = 0;
    this.streams.push(...live);
  }
}
