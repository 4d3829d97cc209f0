// Workgroup grids: WebGPU allows at most maxComputeWorkgroupsPerDimension (65535 by default)
// workgroups per dimension, so a launch of more is a 2-D grid whose flat index the shaders
// rebuild (prelude.ts's flatGroup) and check against the real count.

export interface Grid {
  readonly x: number;
  readonly y: number;
  /** The real workgroup count (x*y may exceed it by less than one row). */
  readonly groups: number;
}

export function gridFor(groups: number, maxPerDimension: number): Grid {
  if (groups <= maxPerDimension) return { x: groups, y: groups === 0 ? 0 : 1, groups };
  const y = Math.ceil(groups / maxPerDimension);
  if (y > maxPerDimension) throw new Error(`invariant: ${groups} workgroups exceed a 2-D grid`);
  // As square as the rows allow, so that few workgroups past the last run only to return.
  return { x: Math.ceil(groups / y), y, groups };
}

/** Workgroups of 256 invocations for `elements`. */
export function groupsOf256(elements: number): number {
  return Math.ceil(elements / 256);
}

/** The lengths of reduce_sum_f32's passes over n elements (contract v2): n, ceil(n/B), …, 1. */
export function reducePassLengths(n: number, block: number): number[] {
  if (n === 0) return [];
  const lengths = [n];
  let length = n;
  do {
    length = Math.ceil(length / block);
    lengths.push(length);
  } while (length > 1);
  return lengths;
}
