#!/usr/bin/env node
// vgpud: one node of the pair. `vgpud --config FILE` (YAML or JSON; VGPU_* env overrides),
// `vgpud --print-config` prints the effective configuration and exits.
import { parseArgs } from "node:util";
import { ConfigError, createLogger, loadConfig, redactConfig } from "@vgpu-ha/common";
import { VgpuNode } from "../node.js";

const USAGE = "usage: vgpud [--config FILE] [--print-config]";

async function main(): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse();
  } catch (e) {
    console.error(`vgpud: ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (args.values.help) {
    console.log(USAGE);
    return 0;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ file: args.values.config ?? process.env.VGPU_CONFIG, env: process.env });
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      return 2;
    }
    throw e;
  }
  if (args.values["print-config"]) {
    console.log(JSON.stringify(redactConfig(config), null, 2));
    return 0;
  }
  const log = createLogger({ level: config.log.level, nodeId: config.nodeId });
  let node: VgpuNode;
  try {
    node = new VgpuNode(config, log); // reads and checks the tls files
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      return 2;
    }
    throw e;
  }
  try {
    await node.start();
  } catch (e) {
    log.fatal({ err: e }, "node failed to start");
    log.flush();
    return 1;
  }
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, "signal received");
      node.stop().then(resolve, resolve);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  await stopped;
  await new Promise<void>((resolve) => log.flush(() => resolve()));
  return 0;
}

function parse() {
  return parseArgs({
    options: {
      config: { type: "string", short: "c" },
      "print-config": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error("vgpud: fatal:", e);
    process.exit(1);
  },
);
