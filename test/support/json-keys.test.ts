// Proves the repeated-key scanner finds a top-level key given twice (what JSON.parse hides),
// and is not fooled by nested objects, arrays or keys inside strings.
import { describe, expect, it } from "vitest";
import { duplicateTopLevelKeys } from "./json-keys.js";

describe("duplicateTopLevelKeys", () => {
  it("finds a key given twice at the top level", () => {
    expect(duplicateTopLevelKeys('{"epoch":2,"msg":"x","epoch":3}')).toEqual(["epoch"]);
  });

  it("ignores the same key at other depths, in arrays and inside strings", () => {
    const line = '{"a":{"a":1},"b":[{"a":2},"\\"a\\":"],"c":"{\\"c\\":1, \\"c\\":2}"}';
    expect(duplicateTopLevelKeys(line)).toEqual([]);
  });
});
