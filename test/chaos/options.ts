// The harness's command line (commander): every option checked, a usage message and exit code 2
// for anything it does not accept.
import { Command, InvalidArgumentError, Option } from "commander";
import { parseCommand, UsageError } from "../support/command-line.js";
import { MODES, type Mode } from "../support/modes.js";
import { GEMM_SIDE_DEFAULT } from "./heavy.js";

export const FAULT_KINDS = [
  "kill",
  "pause",
  "partition",
  "netem",
  "kill-standby",
  "restart",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface ChaosOptions {
  readonly mode: Mode;
  readonly lease: "peer" | "etcd";
  readonly durationS: number;
  /** The kinds chosen; "restart" is the systemd-like restart of dead nodes, not a fault. */
  readonly faults: readonly FaultKind[];
  readonly seed: number;
  readonly sessions: number;
  /** Guest frames a second, all sessions together. */
  readonly rate: number;
  /** Side of the ~20 ms gemm_f32 launches in the guests' mix (0: none). */
  readonly gemmSide: number;
  readonly loopback: boolean;
  /** Report directory. */
  readonly out: string;
}

export { UsageError };

function integer(name: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be an integer`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be ${min}..${max}`);
    return n;
  };
}

function faultList(value: string): FaultKind[] {
  const kinds = value.split(",").map((k) => k.trim());
  for (const k of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(k)) {
      throw new InvalidArgumentError(`unknown fault "${k}" (known: ${FAULT_KINDS.join(",")})`);
    }
  }
  const unique = [...new Set(kinds)] as FaultKind[];
  if (!unique.some((k) => k !== "restart")) {
    throw new InvalidArgumentError("restart alone injects nothing: name at least one fault");
  }
  return unique;
}

function timestamp(): string {
  return new Date().toISOString().replace(/[:.]/g, "-");
}

function program(): Command {
  return new Command("npm run chaos --")
    .description(
      "Chaos harness: a vgpud pair under guest load while a nemesis kills, pauses, partitions and degrades it; checks that nothing acknowledged is lost or applied twice.",
    )
    .addOption(new Option("--mode <mode>", "replication mode").choices(MODES).default("sync"))
    .addOption(
      new Option("--lease <lease>", "lease mode").choices(["peer", "etcd"]).default("peer"),
    )
    .option("--duration <seconds>", "fault phase length", integer("--duration", 5, 86_400), 60)
    .addOption(
      new Option("--faults <list>", `comma-separated, of ${FAULT_KINDS.join(",")}`)
        .argParser(faultList)
        .default([...FAULT_KINDS] as FaultKind[], "all"),
    )
    .option(
      "--seed <n>",
      "seed of the schedule and the workloads",
      integer("--seed", 0, 2 ** 31 - 1),
    )
    .option("--sessions <n>", "guest sessions", integer("--sessions", 1, 64), 4)
    .option(
      "--rate <frames>",
      "guest frames a second, all sessions together",
      integer("--rate", 10, 100_000),
      200,
    )
    .option(
      "--gemm <side>",
      "side (m = n = k) of the gemm_f32 launches in the mix (224: 12-22 ms each here); 0: none",
      integer("--gemm", 0, 1024),
      GEMM_SIDE_DEFAULT,
    )
    .option(
      "--loopback",
      "both nodes on loopback ports even when network namespaces are available",
      false,
    )
    .option("--out <dir>", "report directory (default chaos-report/<timestamp>/)")
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: (s) => process.stdout.write(s) });
}

/** The options, or throws UsageError (with the usage text) for bad ones. */
export function parseOptions(argv: readonly string[]): ChaosOptions | "help" {
  const cmd = parseCommand(program(), argv);
  if (cmd === "help") return "help";
  const o = cmd.opts<{
    mode: Mode;
    lease: "peer" | "etcd";
    duration: number;
    faults: FaultKind[];
    seed?: number;
    sessions: number;
    rate: number;
    gemm: number;
    loopback: boolean;
    out?: string;
  }>();
  return {
    mode: o.mode,
    lease: o.lease,
    durationS: o.duration,
    faults: o.faults,
    seed: o.seed ?? Math.floor(Math.random() * 2 ** 31),
    sessions: o.sessions,
    rate: o.rate,
    gemmSide: o.gemm,
    loopback: o.loopback,
    out: o.out ?? `chaos-report/${timestamp()}`,
  };
}

/** The command line that replays this run. */
export function replayCommand(o: ChaosOptions): string {
  return [
    "npm run chaos --",
    `--mode ${o.mode}`,
    `--lease ${o.lease}`,
    `--duration ${o.durationS}`,
    `--faults ${o.faults.join(",")}`,
    `--seed ${o.seed}`,
    `--sessions ${o.sessions}`,
    `--rate ${o.rate}`,
    `--gemm ${o.gemmSide}`,
    ...(o.loopback ? ["--loopback"] : []),
  ].join(" ");
}
