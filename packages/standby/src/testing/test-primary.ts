// A primary's side for the receiver's tests: a backend of another seed than the standby's, and
// entries as the sequencer makes them (seq 1 opens session "s" of tenant "t"; a call whose
// output is data leaves with an empty digest, kept in `outputs` for its late result).
import {
  type Entry,
  type EntryBody,
  type PrimaryMessage,
  REPLICATION_PROTOCOL_VERSION,
} from "@vgpu-ha/common/core";
import {
  Backend,
  type BackendOptions,
  type ManualExecutor,
  summarizeResult,
} from "@vgpu-ha/gpu-model";

/** Small backend options with tenant "t"; `executor`: a device run by the test. */
export const deviceTestOptions = (seed: number, executor?: ManualExecutor): BackendOptions => ({
  ...(executor ? { executor: () => executor } : {}),
  device: { seed, vramBytes: 1 << 20, maxBoBytes: 1 << 20, maxKernelWork: 1 << 20 },
  tenants: new Map([["t", { vramBytes: 1 << 20, bos: 8, contexts: 8 }]]),
  session: { replyCacheFrames: 16, replyCacheBytes: 1 << 16 },
  maxDmaBytes: 1 << 16,
  maxStoresPerBatch: 16,
  trackMmio: false,
});

type CallBody = Extract<EntryBody, { kind: "call" }>["call"];

export class TestPrimary {
  readonly backend = new Backend(deviceTestOptions(7));
  readonly entries: Entry[] = [];
  /** The output digests the primary's device produced, by seq. */
  readonly outputs = new Map<number, Uint8Array>();
  private frame = 0;

  constructor() {
    this.backend.openSession("s", "t");
    this.push({ kind: "sessionOpen", sessionId: "s", tenant: "t" });
  }

  /** Applies a call of session "s" here and appends its entry; returns its seq. */
  call(call: CallBody): number {
    const session = this.backend.sessions.get("s")!;
    const number = ++this.frame;
    const outcome = this.backend.applyFrame(session, { number, body: { kind: "call", call } });
    const summary = summarizeResult(outcome.result);
    const late = outcome.result.output.kind === "data";
    const seq = this.push({
      kind: "call",
      sessionId: "s",
      frame: number,
      call,
      handles: { contextsCreated: [], contextsDestroyed: [], bosAssigned: [], bosReleased: [] },
      result: late ? { code: summary.code, outputDigest: new Uint8Array(0) } : summary,
    });
    if (late) this.outputs.set(seq, summary.outputDigest);
    return seq;
  }

  push(body: EntryBody): number {
    const seq = this.entries.length + 1;
    this.entries.push({ seq, body });
    return seq;
  }
}

/** A primary with seqs 1..5: the session, a context, an 8 KiB buffer, a write to each page. */
export function primaryOfFive(): TestPrimary {
  const p = new TestPrimary();
  p.call({ op: "contextCreate" });
  p.call({ op: "boAlloc", context: 1, sizeBytes: 8192 });
  p.call({ op: "dmaWrite", context: 1, bo: 1, offset: 0, data: new Uint8Array(8).fill(1) });
  p.call({ op: "dmaWrite", context: 1, bo: 1, offset: 4096, data: new Uint8Array(8).fill(2) });
  return p;
}

type PrimaryHello = Extract<PrimaryMessage, { kind: "hello" }>;

/** The hello of primary "a" of cluster "c" (epoch 2, an empty log, this build's protocol). */
export function testPrimaryHello(overrides: Partial<PrimaryHello> = {}): PrimaryHello {
  return {
    kind: "hello",
    epoch: 2,
    clusterId: "c",
    nodeId: "a",
    firstRetainedSeq: 1,
    lastSeq: 0,
    protocolVersion: REPLICATION_PROTOCOL_VERSION,
    ...overrides,
  };
}
