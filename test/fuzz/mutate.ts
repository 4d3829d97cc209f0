// Bytes for fuzzing: random ones, and valid messages mutated the way broken or hostile peers
// mangle them (bits flipped, bytes set, inserted, deleted, duplicated, the end cut off).
import fc from "fast-check";

type Mutation =
  | { readonly kind: "flip"; readonly at: number; readonly bit: number }
  | { readonly kind: "set"; readonly at: number; readonly value: number }
  | { readonly kind: "insert"; readonly at: number; readonly bytes: Uint8Array }
  | { readonly kind: "delete"; readonly at: number; readonly length: number }
  | { readonly kind: "duplicate"; readonly at: number; readonly length: number }
  | { readonly kind: "truncate"; readonly at: number };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.nat(7) }),
  fc.record({
    kind: fc.constant("set" as const),
    at: fc.nat(),
    value: fc.constantFrom(0, 1, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12),
  }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }),
  }),
  fc.record({
    kind: fc.constant("delete" as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 8 }),
  }),
  fc.record({
    kind: fc.constant("duplicate" as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 16 }),
  }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
);

function apply(bytes: Uint8Array, m: Mutation): Uint8Array {
  const n = bytes.length;
  const at = n === 0 ? 0 : m.at % (n + (m.kind === "insert" ? 1 : 0));
  switch (m.kind) {
    case "flip": {
      if (n === 0) return bytes;
      const out = bytes.slice();
      out[at] = out[at]! ^ (1 << m.bit);
      return out;
    }
    case "set": {
      if (n === 0) return bytes;
      const out = bytes.slice();
      out[at] = m.value;
      return out;
    }
    case "insert":
      return concat(bytes.subarray(0, at), m.bytes, bytes.subarray(at));
    case "delete":
      return concat(bytes.subarray(0, at), bytes.subarray(at + m.length));
    case "duplicate":
      return concat(bytes.subarray(0, at + m.length), bytes.subarray(at));
    case "truncate":
      return bytes.subarray(0, at);
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** A valid message from `seeds`, mutated one to eight times. */
export function mutatedBytes(seeds: readonly Uint8Array[]): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(fc.constantFrom(...seeds), fc.array(mutationArb, { minLength: 1, maxLength: 8 }))
    .map(([seed, ms]) => ms.reduce(apply, seed));
}

/** Random bytes, mutated valid messages, and the valid messages themselves. */
export function hostileBytes(seeds: readonly Uint8Array[]): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }) },
    { weight: 4, arbitrary: mutatedBytes(seeds) },
    { weight: 1, arbitrary: fc.constantFrom(...seeds) },
  );
}
