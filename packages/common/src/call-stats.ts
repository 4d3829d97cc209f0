// Per-call metrics counted in plain numbers on the hot path, handed to prom-client only at
// scrape time. A labelled prom-client Counter.inc plus Histogram.observe cost 0.65–0.93 µs per
// call (each validates and hashes its labels); incrementing a few fields costs nanoseconds.
// The exposed metrics keep their names, types, labels, buckets and meaning:
// `vgpu_frames_total{outcome}`, `vgpu_calls_total{op,code}` (counters) and
// `vgpu_call_duration_seconds{op}` (histogram).
import { Counter, Histogram, type Registry } from "prom-client";

/** The buckets of vgpu_call_duration_seconds (upper bounds, inclusive). */
export const CALL_DURATION_BUCKETS_SECONDS: readonly number[] = [
  1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2, 5e-2, 0.25, 1,
];

/** A count of frames or calls with one label set: count with `count++`. */
export interface Count {
  count: number;
}

/** Calls executed of one operation with one result code. */
export interface CallCount extends Count {
  readonly op: string;
  readonly code: string;
}

/** The durations of one operation's calls, as a Prometheus histogram holds them. */
export class DurationCounts {
  readonly op: string;
  /** Observations per bucket, not cumulative; the last slot is above every bound (+Inf). */
  readonly perBucket: number[] = new Array(CALL_DURATION_BUCKETS_SECONDS.length + 1).fill(0);
  sum = 0;
  count = 0;

  constructor(op: string) {
    this.op = op;
  }

  observe(seconds: number): void {
    const bounds = CALL_DURATION_BUCKETS_SECONDS;
    let b = 0;
    while (b < bounds.length && seconds > bounds[b]!) b++;
    this.perBucket[b]!++;
    this.sum += seconds;
    this.count++;
  }
}

/** Every call's count and duration; look a cell up once per label set and keep it. */
export class CallStats {
  private readonly frames = new Map<string, Count>();
  private readonly calls = new Map<string, Map<string, CallCount>>();
  /** Every CallCount, in the order their label sets first occurred (as prom-client lists them). */
  private readonly callsInOrder: CallCount[] = [];
  private readonly durations = new Map<string, DurationCounts>();

  /** Guest frames by outcome (applied, duplicate, rejected). */
  frame(outcome: string): Count {
    let cell = this.frames.get(outcome);
    if (cell === undefined) {
      cell = { count: 0 };
      this.frames.set(outcome, cell);
    }
    return cell;
  }

  call(op: string, code: string): CallCount {
    let byCode = this.calls.get(op);
    if (byCode === undefined) {
      byCode = new Map();
      this.calls.set(op, byCode);
    }
    let cell = byCode.get(code);
    if (cell === undefined) {
      cell = { op, code, count: 0 };
      byCode.set(code, cell);
      this.callsInOrder.push(cell);
    }
    return cell;
  }

  duration(op: string): DurationCounts {
    let cell = this.durations.get(op);
    if (cell === undefined) {
      cell = new DurationCounts(op);
      this.durations.set(op, cell);
    }
    return cell;
  }

  frameCounts(): IterableIterator<[string, Count]> {
    return this.frames.entries();
  }

  callCounts(): readonly CallCount[] {
    return this.callsInOrder;
  }

  durationCounts(): IterableIterator<DurationCounts> {
    return this.durations.values();
  }
}

type HistogramObject = Awaited<ReturnType<Histogram<"op">["get"]>>;

/**
 * A prom-client Histogram whose values are read from DurationCounts at scrape time instead of
 * being observed one by one (prom-client has no public way to set a histogram's buckets). It
 * exposes exactly what a Histogram fed the same observations would (call-stats.test.ts).
 */
class CountedHistogram extends Histogram<"op"> {
  private readonly read: () => Iterable<DurationCounts>;
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(
    name: string,
    help: string,
    registry: Registry,
    read: () => Iterable<DurationCounts>,
  ) {
    const buckets = [...CALL_DURATION_BUCKETS_SECONDS];
    super({ name, help, labelNames: ["op"], buckets, registers: [registry] });
    this.metricName = name;
    this.metricHelp = help;
    this.read = read;
  }

  /** The values as prom-client's text exposition reads them: each bucket's own label (le)
   * apart from the series' shared labels (op). */
  async getForPromString() {
    const name = this.metricName;
    const values: ValuePair[] = [];
    for (const d of this.read()) {
      const shared = { op: d.op };
      let cumulative = 0;
      CALL_DURATION_BUCKETS_SECONDS.forEach((le, b) => {
        cumulative += d.perBucket[b]!;
        values.push(pair({ le }, cumulative, `${name}_bucket`, shared, null));
      });
      values.push(pair({ le: "+Inf" }, d.count, `${name}_bucket`, shared, null));
      values.push(pair({}, d.sum, `${name}_sum`, shared, undefined));
      values.push(pair({}, d.count, `${name}_count`, shared, undefined));
    }
    return { name, help: this.metricHelp, type: "histogram", values, aggregator: "sum" } as const;
  }

  /** The values as getMetricsAsJSON reads them: all labels together. */
  override async get(): Promise<HistogramObject> {
    const data = await this.getForPromString();
    const values = data.values.map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return { ...data, values } as unknown as HistogramObject;
  }
}

interface ValuePair {
  readonly labels: Record<string, string | number>;
  readonly sharedLabels: Record<string, string>;
  readonly value: number;
  readonly metricName: string;
  /** prom-client gives buckets a null exemplar and the sum and count none. */
  readonly exemplar: null | undefined;
}

function pair(
  labels: Record<string, string | number>,
  value: number,
  metricName: string,
  sharedLabels: Record<string, string>,
  exemplar: null | undefined,
): ValuePair {
  return { labels, sharedLabels, value, metricName, exemplar };
}

/** Registers the metrics of `stats`, read from it at scrape time. */
export function registerCallMetrics(stats: CallStats, registry: Registry): void {
  new Counter({
    name: "vgpu_frames_total",
    help: "Guest frames by outcome (applied, duplicate, rejected)",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [outcome, { count }] of stats.frameCounts()) this.inc({ outcome }, count);
    },
  });
  new Counter({
    name: "vgpu_calls_total",
    help: "Paravirtual calls executed, by operation and result code",
    labelNames: ["op", "code"],
    registers: [registry],
    collect() {
      this.reset();
      for (const { op, code, count } of stats.callCounts()) this.inc({ op, code }, count);
    },
  });
  new CountedHistogram(
    "vgpu_call_duration_seconds",
    "Time to execute one paravirtual call on this node",
    registry,
    () => stats.durationCounts(),
  );
}
