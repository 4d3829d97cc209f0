// The command line of npm run hostile (commander): every option checked, a usage message and
// exit code 2 for anything it does not accept.
import { Command, InvalidArgumentError } from "commander";
import { parseCommand, UsageError } from "../support/command-line.js";
import { isLoopback, splitTarget } from "./attacks/target.js";
import { allAttacks, type Scale } from "./catalogue.js";

export { UsageError };

/** Aiming one attack at a pair someone else runs. */
export interface TargetOptions {
  /** HOST:PORT of the port the attack uses (guest, replication or ops). */
  readonly target: string;
  /** The other node's address of the same kind (crossed-pair), optional. */
  readonly peerTarget?: string;
  /** Ops URLs to watch (epochs, memory, refusal counters): the attacked node's first. */
  readonly ops: readonly string[];
  readonly clusterId: string;
  readonly peerName: string;
  readonly nodeId: string;
  readonly tenant?: { name: string; token: string };
  readonly adminToken?: string;
  readonly tls?: { ca: string; cert: string; key: string; serverName: string };
}

export interface HostileOptions {
  /** The attacks to run, by name, in order. */
  readonly attacks: readonly string[];
  readonly scale: Scale;
  readonly loopback: boolean;
  readonly out: string;
  readonly seed: number;
  readonly target?: TargetOptions;
}

const NAMES = allAttacks().map((a) => a.name);

function attackList(value: string): string[] {
  const names = value.split(",").map((s) => s.trim());
  for (const n of names) {
    if (!NAMES.includes(n))
      throw new InvalidArgumentError(`unknown attack "${n}" (known: ${NAMES.join(", ")})`);
  }
  return names;
}

function hostPort(value: string): string {
  try {
    splitTarget(value);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
  return value;
}

const collect = (v: string, all: string[] = []) => [...all, v];

function program(): Command {
  return new Command("npm run hostile --")
    .description(
      "Attack harness (issue 12): starts its own vgpud pair (network namespaces when root, else loopback) under a normal guest's load, runs every attack in turn, and writes hostile-report/<time>/report.json and report.md. With --target it aims one attack (--attack) at a pair an operator runs instead.",
    )
    .option(
      "--attack <names>",
      `comma-separated, of: ${NAMES.join(", ")} (default: all)`,
      attackList,
    )
    .option("--short", "the short form's counts and durations (what npm test runs)", false)
    .option("--loopback", "loopback ports even when network namespaces are available", false)
    .option("--out <dir>", "report directory (default hostile-report/<time>/)")
    .option("--seed <n>", "seed of the normal guest's workloads", (v) => Number.parseInt(v, 10), 1)
    .option(
      "--target <host:port>",
      "aim the one --attack at this port of a pair you run (guest, replication or ops port, as the attack needs). Only loopback addresses are accepted unless --i-own-this-host is given",
      hostPort,
    )
    .option(
      "--i-own-this-host",
      "allow a --target (and --ops) that is not loopback: only a host you own and may attack",
      false,
    )
    .option(
      "--peer-target <host:port>",
      "crossed-pair: the other node's replication address",
      hostPort,
    )
    .option(
      "--ops <url>",
      "ops URL of the attacked node, then the other (repeat); read for epochs, memory, refusal counters",
      collect,
    )
    .option("--cluster-id <id>", "the target pair's cluster id (stray hellos)", "vgpu-local")
    .option("--node-id <id>", "the attacked node's id (crossed-pair)", "node-a")
    .option("--peer-name <name>", "the attacked node's peer.name (stray hellos)", "peer")
    .option("--tenant <name>", "a tenant for the session attacks")
    .option("--token <token>", "its token")
    .option("--admin-token <token>", "the ops token (promote)")
    .option("--tls-ca <file>", "stray hellos over mutual TLS: CA")
    .option("--tls-cert <file>", "...the attacker's certificate")
    .option("--tls-key <file>", "...its key")
    .option("--tls-name <name>", "...the name the node's certificate must carry")
    .addHelpText(
      "after",
      "\nEvery attack is bounded in count and time. Without --target it attacks only the pair it starts itself. --target refuses any address that is not loopback unless you pass --i-own-this-host: never aim it at a host you do not own.\nExit codes: 0 every attack held, 1 a check failed, 2 usage, 3 the harness could not run.",
    )
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: (s) => process.stdout.write(s) });
}

interface Raw {
  attack?: string[];
  short: boolean;
  loopback: boolean;
  out?: string;
  seed: number;
  target?: string;
  iOwnThisHost: boolean;
  peerTarget?: string;
  ops?: string[];
  clusterId: string;
  nodeId: string;
  peerName: string;
  tenant?: string;
  token?: string;
  adminToken?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsName?: string;
}

function targetOptions(o: Raw): TargetOptions | undefined {
  if (o.target === undefined) return undefined;
  if (o.attack?.length !== 1) throw new UsageError("--target needs exactly one --attack");
  const hosts = [
    splitTarget(o.target).host,
    ...(o.peerTarget ? [splitTarget(o.peerTarget).host] : []),
    ...(o.ops ?? []).map((u) => new URL(u).hostname.replace(/^\[|\]$/g, "")),
  ];
  const far = hosts.filter((h) => !isLoopback(h));
  if (far.length > 0 && !o.iOwnThisHost) {
    throw new UsageError(
      `${far.join(", ")} is not loopback: attack only hosts you own, and say so with --i-own-this-host`,
    );
  }
  const tls = [o.tlsCa, o.tlsCert, o.tlsKey, o.tlsName];
  if (tls.some((v) => v !== undefined) && !tls.every((v) => v !== undefined)) {
    throw new UsageError("--tls-ca, --tls-cert, --tls-key and --tls-name go together");
  }
  if ((o.tenant === undefined) !== (o.token === undefined)) {
    throw new UsageError("--tenant and --token go together");
  }
  return {
    target: o.target,
    ...(o.peerTarget ? { peerTarget: o.peerTarget } : {}),
    ops: o.ops ?? [],
    clusterId: o.clusterId,
    peerName: o.peerName,
    nodeId: o.nodeId,
    ...(o.tenant && o.token ? { tenant: { name: o.tenant, token: o.token } } : {}),
    ...(o.adminToken ? { adminToken: o.adminToken } : {}),
    ...(o.tlsCa && o.tlsCert && o.tlsKey && o.tlsName
      ? { tls: { ca: o.tlsCa, cert: o.tlsCert, key: o.tlsKey, serverName: o.tlsName } }
      : {}),
  };
}

export function parseOptions(argv: readonly string[]): HostileOptions | "help" {
  const cmd = parseCommand(program(), argv);
  if (cmd === "help") return "help";
  const o = cmd.opts<Raw>();
  const target = targetOptions(o);
  return {
    attacks: o.attack ?? NAMES,
    scale: o.short ? "short" : "full",
    loopback: o.loopback,
    out: o.out ?? `hostile-report/${new Date().toISOString().replace(/[:.]/g, "-")}`,
    seed: Number.isFinite(o.seed) ? o.seed : 1,
    ...(target ? { target } : {}),
  };
}
