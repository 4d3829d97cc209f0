#!/usr/bin/env node
import { type Config, ConfigError, createLogger, loadConfig, redactConfig } from "@vgpu-ha/common";
// vgpud: one node of the pair. `vgpud --config FILE` runs it (YAML or JSON; VGPU_* environment
// overrides); `--print-config` prints the effective configuration, `--check` checks it against
// this host (tls files, ports, memory). Argument parsing is commander's; exit codes in
// ../cli/vgpud-help.ts.
import { Command, CommanderError } from "commander";
import { checkPortsFree } from "../check/ports.js";
import { checkBeforeStart } from "../check/start-checks.js";
import { VGPUD_HELP, VgpudExit } from "../cli/vgpud-help.js";
import { DeviceStartError, setUpDevice } from "../device/device-setup.js";
import { VgpuNode } from "../node.js";
import { VERSION } from "../version.js";

interface Options {
  config?: string;
  printConfig?: boolean;
  check?: boolean;
  checkGpu?: boolean;
}

function program(): Command {
  return new Command()
    .name("vgpud")
    .description("One node of a vgpu-ha primary/standby pair: a replicated virtual GPU.")
    .option("-c, --config <file>", "the config file, YAML or JSON (default: $VGPU_CONFIG)")
    .option("--print-config", "print the effective config as JSON (secrets hidden) and exit")
    .option("--check", "check the config and this host (tls files, ports free, memory) and exit")
    .option(
      "--check-gpu",
      "open the webgpu backend (adapter, pipelines, golden vectors), print the adapter and exit",
    )
    .version(VERSION, "-V, --version", "print the version and exit")
    .helpOption("-h, --help", "print this help and exit")
    .addHelpText("after", VGPUD_HELP)
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

/** Loads the config; a problem is printed and gives exit 2. */
function load(options: Options): Config | VgpudExit {
  try {
    return loadConfig({ file: options.config ?? process.env.VGPU_CONFIG, env: process.env });
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      return VgpudExit.config;
    }
    throw e;
  }
}

/** `--check`: everything the start checks, and whether the listeners can be bound now. */
async function check(config: Config): Promise<VgpudExit> {
  try {
    checkBeforeStart(config);
    await checkPortsFree(config);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      return VgpudExit.config;
    }
    throw e;
  }
  const tls = config.tls ? "tls files ok" : "no tls";
  console.log(`vgpud: config ok (node ${config.nodeId}, role ${config.role}, ${tls}, ports free)`);
  return VgpudExit.ok;
}

/**
 * `--check-gpu`: starts the webgpu backend as a node would (whatever device.backend says, with
 * no fallback), prints the adapter and the kernel contract; exit 2 naming why it cannot.
 */
async function checkGpu(config: Config): Promise<VgpudExit> {
  const gpuConfig: Config = {
    ...config,
    device: {
      ...config.device,
      backend: "webgpu",
      webgpu: { ...config.device.webgpu, onFailure: "exit" },
    },
  };
  try {
    const device = await setUpDevice(gpuConfig, { warn: () => {} });
    console.log(
      `vgpud: ${device.description}: golden vectors equal to the model's ` +
        `(kernel contract ${device.kernelContract})`,
    );
    console.log(JSON.stringify(device.adapter));
    // The executor's device keeps the process alive (GPU.md trap 6): main() exits.
    return VgpudExit.ok;
  } catch (e) {
    if (e instanceof DeviceStartError) {
      console.error(`vgpud: ${e.message}`);
      return VgpudExit.config;
    }
    throw e;
  }
}

async function run(config: Config): Promise<VgpudExit> {
  const log = createLogger({ level: config.log.level, nodeId: config.nodeId });
  let node: VgpuNode;
  try {
    node = new VgpuNode(config, log); // runs the start checks (host memory, tls files)
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      return VgpudExit.config;
    }
    throw e;
  }
  try {
    await node.start();
  } catch (e) {
    if (e instanceof DeviceStartError) {
      // No adapter, no Dawn, or a golden vector differs: restarting would not help.
      log.fatal({ reason: e.message }, "the device did not start");
      console.error(`vgpud: ${e.message}`);
      await new Promise<void>((resolve) => log.flush(() => resolve()));
      return VgpudExit.config;
    }
    log.fatal({ err: e }, "node failed to start");
    log.flush();
    return VgpudExit.startFailed;
  }
  const exit = await new Promise<VgpudExit>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, "signal received");
      node.stop().then(
        () => resolve(VgpudExit.ok),
        () => resolve(VgpudExit.ok),
      );
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    // The device failed: the node stepped down (device-failure.ts); a restart brings it back
    // as a standby with a fresh device.
    node.deviceFailure.then(() => resolve(VgpudExit.deviceFailed));
    // This standby's primary runs another kernel contract: it stopped; a restart would not help.
    node.contractRefusal.then(() => resolve(VgpudExit.config));
  });
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  return exit;
}

async function main(argv: readonly string[]): Promise<VgpudExit> {
  const cli = program();
  try {
    cli.parse([...argv]);
  } catch (e) {
    if (e instanceof CommanderError) {
      return e.exitCode === 0 ? VgpudExit.ok : VgpudExit.config; // commander printed why
    }
    throw e;
  }
  if (cli.args.length > 0) {
    console.error(`vgpud: unexpected argument ${cli.args[0]} (see vgpud --help)`);
    return VgpudExit.config;
  }
  const options = cli.opts<Options>();
  const config = load(options);
  if (typeof config === "number") return config;
  if (options.printConfig) {
    console.log(JSON.stringify(redactConfig(config), null, 2));
    return VgpudExit.ok;
  }
  if (options.check) return check(config);
  if (options.checkGpu) return checkGpu(config);
  return run(config);
}

main(process.argv).then(
  (code) => process.exit(code),
  (e) => {
    console.error("vgpud: fatal:", e);
    process.exit(VgpudExit.startFailed);
  },
);
