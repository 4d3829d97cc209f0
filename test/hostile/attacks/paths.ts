// Paths of the programs the attacks spawn, the same whether this module runs from test/ (vitest,
// TypeScript sources) or test/dist/ (npm run hostile, compiled).
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
/** The repository root. */
const ROOT = here.replace(/\/test\/(dist\/)?hostile\/attacks\/$/, "");

export const SESSION_CLIENT = `${ROOT}/test/dist/hostile/session-client.js`;
export const VGPUCTL = `${ROOT}/packages/client/dist/vgpuctl/main.js`;
export const HOSTILE_GUEST = `${ROOT}/test/dist/support/hostile-guest.js`;
