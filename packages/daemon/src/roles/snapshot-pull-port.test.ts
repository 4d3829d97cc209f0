// Proves which transport a pull takes (pagesPullPort), with fake transports and clock: the
// pages socket first; a primary that does not speak it is pulled from over gRPC at once and for
// PAGES_RETRY_MS after, then the socket is tried again; a socket pull that fails otherwise
// (refused, broken) is reported as it is, with no gRPC pull; cancelling reaches whichever runs.
import type { StandbyMessage } from "@vgpu-ha/common";
import type { SnapshotPullPort } from "@vgpu-ha/standby";
import { describe, expect, it } from "vitest";
import { PAGES_RETRY_MS, pagesPullPort } from "./snapshot-pull-port.js";
import type { PagesClient, PagesDone } from "./snapshot-pull-socket.js";

const request = { kind: "hello" } as StandbyMessage;

function fakes() {
  const log: string[] = [];
  let pagesDone: PagesDone = () => {};
  let grpcDone: (reason: string) => void = () => {};
  const pages: PagesClient = {
    open(_r, _d, done) {
      log.push("pages");
      pagesDone = done;
      return () => log.push("pages cancelled");
    },
  };
  const grpc: SnapshotPullPort = {
    open(_r, _d, done) {
      log.push("grpc");
      grpcDone = done;
      return () => log.push("grpc cancelled");
    },
  };
  return {
    log,
    pages,
    grpc,
    endPages: (reason: string, foreign: boolean) => pagesDone(reason, foreign),
    endGrpc: (reason: string) => grpcDone(reason),
  };
}

describe("pagesPullPort", () => {
  it("turns to gRPC for a primary without the socket, and tries the socket again later", () => {
    const f = fakes();
    let now = 1000;
    const port = pagesPullPort(f.pages, f.grpc, () => now);
    const ended: string[] = [];
    port.open(
      request,
      () => {},
      (r) => ended.push(r),
    );
    f.endPages("the primary offers no pages socket", true);
    expect(f.log).toEqual(["pages", "grpc"]); // at once, within the same pull
    expect(ended).toEqual([]);
    f.endGrpc("");
    expect(ended).toEqual([""]);
    now += PAGES_RETRY_MS - 1;
    const cancel = port.open(
      request,
      () => {},
      () => {},
    );
    cancel();
    expect(f.log.slice(2)).toEqual(["grpc", "grpc cancelled"]);
    now += 1;
    port.open(
      request,
      () => {},
      () => {},
    );
    expect(f.log.at(-1)).toBe("pages");
  });

  it("reports a refused or broken socket pull as it is, without gRPC", () => {
    const f = fakes();
    const port = pagesPullPort(f.pages, f.grpc, () => 0);
    const ended: string[] = [];
    const cancel = port.open(
      request,
      () => {},
      (r) => ended.push(r),
    );
    f.endPages("SNAPSHOT_STALE: pull of snapshot 2", false);
    expect(ended).toEqual(["SNAPSHOT_STALE: pull of snapshot 2"]);
    port.open(
      request,
      () => {},
      () => {},
    );
    expect(f.log).toEqual(["pages", "pages"]);
    cancel();
    expect(f.log.at(-1)).toBe("pages cancelled");
  });
});
