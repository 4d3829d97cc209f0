// Proves the error catalogue covers every code the proto defines, with unique names, and that the
// edge gives each code a gRPC status on top of the core's entry (same name, retryability, text).
import { status as GrpcStatus } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { ERROR_CATALOGUE as CORE_CATALOGUE } from "./core/errors.js";
import {
  ERROR_CATALOGUE,
  ErrorCode,
  errorName,
  GRPC_STATUS,
  grpcStatusOf,
  VgpuError,
} from "./errors.js";

describe("error catalogue", () => {
  const codes = Object.values(ErrorCode).filter((v): v is number => typeof v === "number");

  it("has an entry for every proto error code, named after it", () => {
    for (const code of codes) {
      expect(CORE_CATALOGUE[code as ErrorCode]?.name).toBe(ErrorCode[code]);
    }
    expect(Object.keys(CORE_CATALOGUE)).toHaveLength(codes.length);
    expect(new Set(Object.values(CORE_CATALOGUE).map((e) => e.name)).size).toBe(codes.length);
  });

  it("keeps the gRPC column at the edge: every code has a status, the rest is the core's", () => {
    expect(Object.keys(GRPC_STATUS)).toHaveLength(codes.length);
    expect(Object.keys(ERROR_CATALOGUE)).toHaveLength(codes.length);
    for (const code of codes as ErrorCode[]) {
      expect(ERROR_CATALOGUE[code]).toEqual({
        ...CORE_CATALOGUE[code],
        grpcStatus: GRPC_STATUS[code],
      });
      expect("grpcStatus" in CORE_CATALOGUE[code]).toBe(false);
    }
    expect(grpcStatusOf(ErrorCode.NOT_PRIMARY)).toBe(GrpcStatus.UNAVAILABLE);
    expect(grpcStatusOf(ErrorCode.OUT_OF_BOUNDS)).toBe(GrpcStatus.OUT_OF_RANGE);
    expect(grpcStatusOf(9999 as ErrorCode)).toBe(GrpcStatus.UNKNOWN);
  });

  it("makes typed errors with the catalogue's retryability", () => {
    const e = new VgpuError(ErrorCode.NOT_PRIMARY);
    expect(e.retryable).toBe(true);
    expect(new VgpuError(ErrorCode.OUT_OF_BOUNDS).retryable).toBe(false);
    expect(errorName(ErrorCode.QUOTA_EXCEEDED)).toBe("QUOTA_EXCEEDED");
  });
});
