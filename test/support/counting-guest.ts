// A guest that knows exactly what it was told had happened: it increments its own counter
// (a non-idempotent kernel), writes numbered records by DMA and by MMIO stores, and counts
// every acknowledgement. check() reads the node's state back and compares it with the count —
// so a frame applied twice, or an acknowledged frame lost, shows. A session that fails while
// running is kept as `failure` (check() throws it).
import { buf, Session, u32 } from "@vgpu-ha/client";

const RECORDS = 1024;

export class CountingGuest {
  readonly session: Session;
  private ctx = 0;
  private counter = 0;
  private records = 0;
  private mappedBo = 0;
  increments = 0;
  writes = 0;
  stores = 0;
  /** Monotonic ms of every acknowledgement (for failover timings). */
  readonly ackTimes: number[] = [];
  /** Why the session failed while running (an async failover's reported loss), if it did. */
  failure: unknown;
  private running: Promise<void> | undefined;
  private stopping = false;

  private constructor(session: Session) {
    this.session = session;
  }

  static async open(endpoints: string[], tenant: string, token: string): Promise<CountingGuest> {
    const session = await Session.open({ endpoints, tenant, token, failoverTimeoutMs: 60_000 });
    const g = new CountingGuest(session);
    g.ctx = await session.createContext();
    g.counter = await session.allocBo(g.ctx, 4096);
    g.records = await session.allocBo(g.ctx, RECORDS * 4);
    g.mappedBo = await session.allocBo(g.ctx, RECORDS * 4);
    return g;
  }

  /** Runs until stop(): a few frames in flight, every acknowledgement counted. */
  start(): void {
    const s = this.session;
    const mapped = s.map(this.ctx, this.mappedBo, RECORDS * 4);
    this.running = (async () => {
      const m = await mapped;
      while (!this.stopping) {
        const i = this.writes % RECORDS;
        const value = new Uint8Array(new Uint32Array([this.writes + 1]).buffer);
        m.writeU32((this.stores % RECORDS) * 4, this.stores + 1);
        await Promise.all([
          s.launch(this.ctx, "increment_u32", [buf(this.counter), u32(1), u32(1)]).then(() => {
            this.increments++;
          }),
          s.dmaWrite(this.ctx, this.records, i * 4, value).then(() => {
            this.writes++;
          }),
          m.flush().then(() => {
            this.stores++;
          }),
        ]);
        this.ackTimes.push(performance.now());
      }
    })().catch((e: unknown) => {
      this.failure = e;
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  /** The counter as the node holds it now (each acknowledged increment must be in it once). */
  async counterHeld(): Promise<number> {
    const bytes = await this.session.dmaRead(this.ctx, this.counter, 0, 4);
    return new Uint32Array(bytes.slice().buffer)[0]!;
  }

  /** What the node holds against what this guest was told; throws on any difference. */
  async check(): Promise<{ increments: number; writes: number; stores: number }> {
    if (this.failure !== undefined) throw this.failure;
    const s = this.session;
    const counter = new Uint32Array(
      (await s.dmaRead(this.ctx, this.counter, 0, 4)).slice().buffer,
    )[0];
    if (counter !== this.increments) {
      throw new Error(`counter ${counter} but ${this.increments} increments acknowledged`);
    }
    const recs = new Uint32Array(
      (await s.dmaRead(this.ctx, this.records, 0, RECORDS * 4)).slice().buffer,
    );
    const last = (this.writes - 1) % RECORDS;
    if (this.writes > 0 && recs[last] !== this.writes) {
      throw new Error(`record ${last} holds ${recs[last]}, expected write ${this.writes}`);
    }
    const stores = new Uint32Array(
      (await s.dmaRead(this.ctx, this.mappedBo, 0, RECORDS * 4)).slice().buffer,
    );
    const lastStore = (this.stores - 1) % RECORDS;
    if (this.stores > 0 && stores[lastStore] !== this.stores) {
      throw new Error(
        `store slot ${lastStore} holds ${stores[lastStore]}, expected ${this.stores}`,
      );
    }
    return { increments: this.increments, writes: this.writes, stores: this.stores };
  }
}
