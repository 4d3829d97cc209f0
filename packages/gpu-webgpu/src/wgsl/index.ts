// Every compute pipeline of the backend, by name, with its WGSL (prelude first).
import { BYTE_COPY_WGSL, PAGE_SCAN_WGSL, PATCH_WGSL } from "./bytes.js";
import {
  ADD_U32_WGSL,
  COPY_WGSL,
  FILL_WGSL,
  HISTOGRAM_CLEAR_WGSL,
  HISTOGRAM_COUNT_WGSL,
  INCREMENT_U32_WGSL,
  SAXPY_F32_WGSL,
} from "./elementwise.js";
import { GEMM_WGSL } from "./gemm.js";
import { PRELUDE } from "./prelude.js";
import { REDUCE_PASS_WGSL } from "./reduce.js";
import { STENCIL_STEP_WGSL } from "./stencil.js";

export const SHADERS = {
  fill: FILL_WGSL,
  copy: COPY_WGSL,
  add_u32: ADD_U32_WGSL,
  increment_u32: INCREMENT_U32_WGSL,
  saxpy_f32: SAXPY_F32_WGSL,
  histogram_clear: HISTOGRAM_CLEAR_WGSL,
  histogram_count: HISTOGRAM_COUNT_WGSL,
  reduce_pass: REDUCE_PASS_WGSL,
  stencil_step: STENCIL_STEP_WGSL,
  gemm_f32: GEMM_WGSL,
  patch: PATCH_WGSL,
  byte_copy: BYTE_COPY_WGSL,
  page_scan: PAGE_SCAN_WGSL,
} as const;

export type ShaderName = keyof typeof SHADERS;

export const SHADER_NAMES = Object.keys(SHADERS) as ShaderName[];

/** The full WGSL module of a pipeline. */
export function shaderSource(name: ShaderName): string {
  return PRELUDE + SHADERS[name];
}

export { PATCH_RECORD_WORDS } from "./bytes.js";
export { GEMM_TILE } from "./gemm.js";
export { PARAM_BYTES, PARAM_GROUPS, PARAM_GX, PARAM_ONE, PARAM_WORDS } from "./prelude.js";
export { REDUCE_BLOCK } from "./reduce.js";
