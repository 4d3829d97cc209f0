// The primary's Sender options its own tests use (packages/primary/src/testing, which the
// package's exports do not name), loaded from beside the package's entry point as workload.ts
// loads gpu-model's generator; the types come from its source.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as SenderOptions from "../../packages/primary/src/testing/sender-options.js";

const entry = createRequire(import.meta.url).resolve("@vgpu-ha/primary");
const options: typeof SenderOptions = await import(
  pathToFileURL(join(dirname(entry), "testing", "sender-options.js")).href
);

export const { testSenderOptions } = options;
