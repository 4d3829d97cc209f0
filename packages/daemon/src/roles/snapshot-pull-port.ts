// Which transport a standby's snapshot pull takes: the pages socket (snapshot-pull-socket.ts)
// when the primary offers it, PullSnapshot over gRPC (snapshot-pull-grpc.ts) when it does not —
// an older primary during an upgrade. A primary found not to offer it is pulled from over gRPC
// at once, and for PAGES_RETRY_MS after (then the socket is tried again: it may have been
// upgraded meanwhile). Any other end of a socket pull (refused, broken) is the puller's to
// retry, as with gRPC.
import type { SnapshotPullPort } from "@vgpu-ha/standby";
import type { PagesClient } from "./snapshot-pull-socket.js";

/** How long a primary that offered no pages socket is pulled from over gRPC only. */
export const PAGES_RETRY_MS = 60_000;

export function pagesPullPort(
  pages: PagesClient,
  grpc: SnapshotPullPort,
  nowMs: () => number,
): SnapshotPullPort {
  let foreignAtMs = Number.NEGATIVE_INFINITY;
  const grpcOnly = () => nowMs() - foreignAtMs < PAGES_RETRY_MS;
  return {
    warm() {
      if (grpcOnly()) grpc.warm?.();
    },
    preconnect() {
      if (!grpcOnly()) pages.preconnect?.();
    },
    close() {
      grpc.close?.();
    },
    open(request, deliver, done, place) {
      if (grpcOnly()) return grpc.open(request, deliver, done);
      let cancel = pages.open(
        request,
        deliver,
        (reason, foreign) => {
          if (!foreign) {
            done(reason);
            return;
          }
          foreignAtMs = nowMs();
          cancel = grpc.open(request, deliver, done);
        },
        place,
      );
      return () => cancel();
    },
  };
}
