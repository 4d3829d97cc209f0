// The guests' frames come from gpu-model's seeded workload generator (every call kind, every
// kernel, store batches of widths 1/2/4/8, deliberate faults and re-sends, each frame with the
// outcome the backend must give). It lives in gpu-model's testing/ folder, which the package's
// exports do not name, so it is loaded from beside the package's entry point; the types come
// from its source.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as RandomWorkload from "../../packages/gpu-model/src/testing/random-workload.js";

export type {
  Workload,
  WorkloadStep,
} from "../../packages/gpu-model/src/testing/random-workload.js";

const entry = createRequire(import.meta.url).resolve("@vgpu-ha/gpu-model");
const generator: typeof RandomWorkload = await import(
  pathToFileURL(join(dirname(entry), "testing", "random-workload.js")).href
);

export const { generateWorkload, backendOptionsFor } = generator;
