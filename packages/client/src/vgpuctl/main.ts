#!/usr/bin/env node
// vgpuctl: operate a vgpud primary/standby pair through the nodes' ops HTTP API. Argument
// parsing is commander's; every failure ends with one of the exit codes in exit-codes.ts.
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import * as commands from "./commands.js";
import { CliError, EXIT_CODES_HELP, ExitCode } from "./exit-codes.js";
import * as operator from "./operator-commands.js";
import { OpsClient } from "./ops-client.js";
import { VERSION } from "./version.js";

const DEFAULT_NODE = "http://127.0.0.1:9400";
const DEFAULT_TIMEOUT_MS = 5_000;
const ACTION_TIMEOUT_MIN_MS = 30_000;

interface GlobalOptions {
  node?: string[];
  token?: string;
  json?: boolean;
  timeout: number;
}

function positiveSeconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected seconds > 0");
  return n;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError("expected milliseconds > 0");
  return n;
}

/** `--node` repeats (and takes comma lists); not variadic, so `--node URL status` parses. */
const collect = (value: string, previous: string[] | undefined) => [
  ...(previous ?? []),
  ...splitList(value),
];
const splitList = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter((x) => x !== "");

function checkUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(ExitCode.usage, `--node ${url}: not a URL (like ${DEFAULT_NODE})`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new CliError(ExitCode.usage, `--node ${url}: expected http:// or https://`);
  }
  return url;
}

function contextOf(program: Command): commands.Context {
  const o = program.opts<GlobalOptions>();
  // VGPU_NODES and VGPU_TOKEN are the old names, still read (vgpud ignores them).
  const env = process.env;
  const urls = o.node ?? splitList(env.VGPUCTL_NODES ?? env.VGPU_NODES ?? "");
  const token = o.token ?? env.VGPUCTL_TOKEN ?? env.VGPU_TOKEN;
  const clients = (urls.length > 0 ? urls : [DEFAULT_NODE])
    .map(checkUrl)
    .map((u) => new OpsClient(u, { token, timeoutMs: o.timeout }));
  return {
    clients,
    json: o.json === true,
    actionTimeoutMs: Math.max(o.timeout, ACTION_TIMEOUT_MIN_MS),
    out: (text) => process.stdout.write(`${text}\n`),
    tty: process.stdout.isTTY === true,
  };
}

function build(finish: (code: ExitCode) => void): Command {
  const program = new Command();
  program
    .name("vgpuctl")
    .description("Operate a vgpud primary/standby pair through the nodes' ops HTTP API.")
    .option(
      "--node <url>",
      `ops URL of a node; repeat for each (default: $VGPUCTL_NODES, else ${DEFAULT_NODE})`,
      collect,
    )
    .option(
      "--token <token>",
      "admin token for promote/demote/switchover/verify/pause/resume/reinit ($VGPUCTL_TOKEN)",
    )
    .option("--json", "print JSON instead of text")
    .option("--timeout <ms>", "request timeout in ms", positiveInt, DEFAULT_TIMEOUT_MS)
    .version(VERSION, "-V, --version", "print the version and exit")
    .addHelpText("after", EXIT_CODES_HELP)
    .exitOverride()
    .showSuggestionAfterError();

  const run = (action: (ctx: commands.Context) => Promise<ExitCode>) => async () =>
    finish(await action(contextOf(program)));

  program
    .command("status")
    .description("both nodes in a compact table (exit 3 if any is unreachable)")
    .action(run(commands.status));
  program
    .command("watch")
    .description("redraw the status table until Ctrl-C")
    .option("--interval <ms>", "refresh interval in ms", positiveInt, 1000)
    .action(async (opts: { interval: number }) => {
      process.on("SIGINT", () => finish(ExitCode.ok));
      await commands.watch(contextOf(program), opts.interval);
    });
  program
    .command("promote")
    .description("promote the standby (refused while a primary holds its lease)")
    .option(
      "--force",
      "UNSAFE: promote even while the primary holds its lease or the replica is not eligible (two primaries; the lower epoch discards its state)",
    )
    .action((opts: { force?: boolean }) =>
      run((ctx) => commands.promote(ctx, opts.force === true))(),
    );
  program
    .command("demote")
    .description("hand over and step the primary down")
    .option("--force", "step down even when the handover fails")
    .action((opts: { force?: boolean }) =>
      run((ctx) => commands.demote(ctx, opts.force === true))(),
    );
  program
    .command("switchover")
    .description(
      "planned switchover to the standby, showing progress, then waits until both nodes are ready",
    )
    .option("--no-wait", "return once the new primary serves, without waiting for readiness")
    .option("--wait-timeout <s>", "seconds to wait for readiness", positiveSeconds, 60)
    .action((opts: { wait: boolean; waitTimeout: number }) =>
      run((ctx) =>
        commands.switchover(ctx, { ready: opts.wait, timeoutMs: opts.waitTimeout * 1000 }),
      )(),
    );
  program
    .command("pause")
    .description(
      "maintenance mode: no automatic failover until resume (switchover and promote still work)",
    )
    .action(run((ctx) => operator.maintenance(ctx, true)));
  program
    .command("resume")
    .description("end maintenance mode: automatic failover again")
    .action(run((ctx) => operator.maintenance(ctx, false)));
  program
    .command("history")
    .description("every role change of both nodes (time, epoch, from → to, reason, seq, who asked)")
    .action(run(operator.history));
  program
    .command("reinit")
    .argument("<node>", "the standby, by node id or ops URL")
    .description("the standby drops its replica and takes a fresh snapshot; shows the resync")
    .option("--force", "even with no primary in sight (the replica may be the only copy)")
    .option("--no-wait", "return at once instead of following the resync")
    .option(
      "--wait-timeout <s>",
      "seconds to wait for the standby to be ready",
      positiveSeconds,
      600,
    )
    .action((node: string, opts: { force?: boolean; wait: boolean; waitTimeout: number }) =>
      run((ctx) =>
        operator.reinit(ctx, node, {
          force: opts.force === true,
          noWait: !opts.wait,
          timeoutMs: opts.waitTimeout * 1000,
          tty: ctx.tty === true,
        }),
      )(),
    );
  program
    .command("wait-ready")
    .description("wait until every node is ready (exit 0), or exit 1 after --timeout seconds")
    .usage("--timeout <s>")
    .addOption(
      new Option("--wait-ready-timeout <s>", "see --timeout").argParser(positiveSeconds).hideHelp(),
    )
    .addHelpText(
      "after",
      "\nWait-ready option:\n  --timeout <s>  seconds to wait (here: not the request timeout)",
    )
    .action((opts: { waitReadyTimeout?: number }) =>
      run((ctx) => {
        if (opts.waitReadyTimeout === undefined) {
          throw new CliError(ExitCode.usage, "wait-ready needs --timeout <seconds>");
        }
        return operator.waitReady(ctx, opts.waitReadyTimeout * 1000);
      })(),
    );
  program
    .command("verify")
    .description("compare both replicas' digests at one seq (exit 1 if they differ)")
    .action(run(commands.verify));
  return program;
}

/** Exits once stdout has flushed (process.exit alone can cut a piped output short). */
function finish(code: ExitCode): void {
  process.stdout.write("", () => process.exit(code));
}

/**
 * commander gives every `--timeout` to the global option (the request timeout, in ms), even
 * after a subcommand; after `wait-ready` it is the command's own (seconds to wait).
 */
function waitReadyTimeout(argv: readonly string[]): string[] {
  const at = argv.indexOf("wait-ready");
  if (at < 0) return [...argv];
  const tail = argv
    .slice(at + 1)
    .map((a) =>
      a === "--timeout"
        ? "--wait-ready-timeout"
        : a.replace(/^--timeout=/, "--wait-ready-timeout="),
    );
  return [...argv.slice(0, at + 1), ...tail];
}

async function main(argv: readonly string[]): Promise<void> {
  try {
    await build(finish).parseAsync(waitReadyTimeout(argv));
  } catch (e) {
    if (e instanceof CommanderError) {
      // commander already printed the message or the help
      return finish(e.exitCode === 0 ? ExitCode.ok : ExitCode.usage);
    }
    if (e instanceof CliError) {
      process.stderr.write(`vgpuctl: ${e.message}\n`);
      return finish(e.exitCode);
    }
    process.stderr.write(`vgpuctl: ${e instanceof Error ? e.message : String(e)}\n`);
    finish(ExitCode.failure);
  }
}

await main(process.argv);
