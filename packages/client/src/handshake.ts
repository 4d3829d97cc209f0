// Opening (or resuming) a session on one stream: send Open, wait for the node's first answer —
// Opened, a refusal, the stream's end, or nothing within the timeout. A stream the node refuses
// because its connection is at guest.maxStreamsPerConnection is opened again on another
// connection (the dialer learns the limit). Callbacks over the session's ports, no promises.
import { create } from "@bufbuild/protobuf";
import { ErrorCode, type TimerHandle, wire } from "@vgpu-ha/common";
import type { NodeRefusal, OpenedInfo } from "./core/session-machine.js";
import type { NodeStream, SessionPorts } from "./ports.js";

/** A stream whose node answered Opened. */
export interface OpenedStream {
  readonly endpoint: string;
  readonly stream: NodeStream;
  readonly opened: OpenedInfo;
}

export interface OpenRequest {
  readonly tenant: string;
  readonly token: string;
  readonly resumeSessionId?: string;
  /** The cluster id the guest expects; a node of another answers WRONG_CLUSTER. */
  readonly clusterId?: string;
}

/** A stream refused because its connection is at the node's stream limit is retried this often. */
const STREAM_LIMIT_RETRIES = 8;

export function handshake(
  ports: Pick<SessionPorts, "dial" | "timers">,
  endpoint: string,
  open: OpenRequest,
  timeoutMs: number,
  done: (outcome: OpenedStream | NodeRefusal) => void,
  attempt = 0,
): void {
  const stream = ports.dial(endpoint);
  let answered = false;
  const answer = (outcome: OpenedStream | NodeRefusal) => {
    if (answered) return;
    answered = true;
    ports.timers.clear(timer);
    if (!("stream" in outcome)) stream.cancel();
    done(outcome);
  };
  const transport = (message: string): NodeRefusal => ({
    code: ErrorCode.NOT_PRIMARY,
    message: `${endpoint}: ${message}`,
    redirect: "",
    answered: false,
  });
  let timer: TimerHandle | undefined;
  stream.listen({
    message: (m) => {
      const k = m.kind;
      if (k.case === "opened") {
        const { sessionId, nodeId } = k.value;
        const opened = {
          sessionId,
          nodeId,
          epoch: Number(k.value.epoch),
          lastFrame: Number(k.value.lastFrame),
        };
        answer({ endpoint, stream, opened });
      } else if (k.case === "error") {
        const { code, message, redirect, streamLimit } = k.value;
        if (
          code === ErrorCode.LIMIT_EXCEEDED &&
          streamLimit > 0 &&
          attempt < STREAM_LIMIT_RETRIES
        ) {
          if (answered) return;
          answered = true;
          ports.timers.clear(timer);
          stream.full?.(streamLimit);
          stream.cancel();
          handshake(ports, endpoint, open, timeoutMs, done, attempt + 1);
          return;
        }
        answer({ code, message: `${endpoint}: ${message}`, redirect, answered: true });
      } else {
        answer({
          code: ErrorCode.MALFORMED,
          message: `unexpected ${k.case}`,
          redirect: "",
          answered: false,
        });
      }
    },
    closed: (reason) => answer(transport(reason)),
  });
  timer = ports.timers.setTimeout(timeoutMs, () =>
    answer(transport(`no answer in ${timeoutMs} ms`)),
  );
  stream.send(create(wire.GuestMessageSchema, { kind: { case: "open", value: open } }));
}
