// Proves the error catalogue covers every code the proto defines, with unique names.
import { describe, expect, it } from "vitest";
import { ERROR_CATALOGUE, ErrorCode, errorName, VgpuError } from "./errors.js";

describe("error catalogue", () => {
  const codes = Object.values(ErrorCode).filter((v): v is number => typeof v === "number");

  it("has an entry for every proto error code, named after it", () => {
    for (const code of codes) {
      expect(ERROR_CATALOGUE[code as ErrorCode]?.name).toBe(ErrorCode[code]);
    }
    expect(Object.keys(ERROR_CATALOGUE)).toHaveLength(codes.length);
  });

  it("makes typed errors with the catalogue's retryability", () => {
    const e = new VgpuError(ErrorCode.NOT_PRIMARY);
    expect(e.retryable).toBe(true);
    expect(new VgpuError(ErrorCode.OUT_OF_BOUNDS).retryable).toBe(false);
    expect(errorName(ErrorCode.QUOTA_EXCEEDED)).toBe("QUOTA_EXCEEDED");
  });
});
