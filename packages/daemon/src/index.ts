export { type NodeAddresses, splitHostPort, VgpuNode } from "./node.js";
export { buildOpsApp, type OpsDeps, type Readiness } from "./ops/ops-app.js";
export { freePort } from "./process/free-port.js";
export { gpuWrap, testGpus } from "./process/gpu-placement.js";
export { pairConfigs } from "./process/pair-config.js";
export { type SpawnedNode, spawnVgpud, VGPUD_BIN } from "./process/spawn-node.js";
export {
  FRAME,
  type Frame,
  FrameError,
  FrameReader,
  frameOf,
  HELLO_BYTES_MAX,
  PAGES_MAGIC,
  parseRefused,
  refusedPayload,
} from "./roles/snapshot-pull-frames.js";
export { PlacedChunkReader } from "./roles/snapshot-pull-place.js";
