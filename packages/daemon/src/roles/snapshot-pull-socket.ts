// The standby's end of a pages socket (snapshot-pull-frames.ts): each pull is a connection to
// the primary's replication port — mutual TLS as the replication stream's (the CA, our
// certificate, the server must name peer.name) offering PAGES_ALPN, or plaintext opening with
// PAGES_MAGIC — then the hello, then the primary's answer and the chunks. Each chunk is read
// straight from the socket into a buffer of its frame's size (the socket's `onread` buffer is
// the reader's target), decoded in place (the pages view that buffer) and marked pagesOwned, so
// the device thread takes it without a copy (snapshot-sink.ts) and hands it back once written
// (pagesReturn): the buffers come from a pool of the pull's own (receive-pool.ts), so a steady
// pull allocates none per chunk. A primary that does not speak
// it (an older version: ALPN h2 only, or HTTP/2's bytes in plaintext) is told apart from a
// broken pull: `done` says so (`foreign`), and pagesPullPort turns to PullSnapshot.
// Given a placer (the receiver's: the replica being restored, where the device's memory is
// this thread's), a chunk's runs are read straight into the replica's buffers instead
// (snapshot-pull-place.ts); the frame's buffer then holds only the heads and goes back to the
// pool at once. A standby expecting a snapshot connects ahead (preconnect): the pull then
// writes its hello at once on that connection.
import { connect as netConnect, type Socket } from "node:net";
import { type ConnectionOptions, type TLSSocket, connect as tlsConnect } from "node:tls";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  certificateNames,
  decodePrimaryMessage,
  ErrorCode,
  encodeStandbyMessage,
  type PagesPlacer,
  type PrimaryMessage,
  type StandbyMessage,
  type TlsFiles,
  traceSnapshotChunk,
  wire,
} from "@vgpu-ha/common";
import { ReceivePool } from "./receive-pool.js";
import {
  FRAME,
  type Frame,
  FrameError,
  FrameReader,
  frameOf,
  PAGES_ALPN,
  PAGES_MAGIC,
  parseRefused,
} from "./snapshot-pull-frames.js";
import { PlacedChunkReader } from "./snapshot-pull-place.js";

export interface PagesClientOptions {
  /** The primary's replication address (peer.replicationAddress). */
  readonly address: string;
  /** Mutual TLS as the replication stream's: our files, and the name the primary must have. */
  readonly tls?: { readonly files: TlsFiles; readonly peerName: string };
  /** The largest chunk frame accepted (the replication port's message limit). */
  readonly maxMessageBytes: number;
}

/** How a pull ended: `reason` "" when the primary ended it; `foreign`: it does not speak it. */
export type PagesDone = (reason: string, foreign: boolean) => void;

export interface PagesClient {
  open(
    request: StandbyMessage,
    deliver: (m: PrimaryMessage) => void,
    done: PagesDone,
    place?: PagesPlacer,
  ): () => void;
  /**
   * Connects ahead of a pull expected soon (a standby that holds no replica: its snapshot
   * follows): the next open() takes that connection and writes its hello at once, without
   * waiting for this thread to see the connection up. At most one waits; one the primary
   * closed (it drops a connection without a hello after HELLO_TIMEOUT_MS) is made again.
   */
  preconnect?(): void;
}

const REFUSAL_BYTES_MAX = 4 + 1024;

export function pagesClient(o: PagesClientOptions): PagesClient {
  let spare: PagesConnection | undefined;
  return {
    open(request, deliver, done, place) {
      const c = spare?.idle ? spare : new PagesConnection(o);
      spare = undefined;
      return c.attach({ request, deliver, done, place });
    },
    preconnect() {
      if (spare?.idle !== true) spare = new PagesConnection(o);
    },
  };
}

interface PullOfConnection {
  readonly request: StandbyMessage;
  readonly deliver: (m: PrimaryMessage) => void;
  readonly done: PagesDone;
  readonly place: PagesPlacer | undefined;
}

/**
 * One connection, one pull: made, then given its pull (attach), whose hello goes out as soon
 * as the connection is up (at once when it already is). Idle, it waits for a pull and ends
 * quietly if the primary closes it or does not speak the pages socket (the pull made later on
 * a new connection says why).
 */
class PagesConnection {
  private readonly socket: Socket;
  private readonly pool = new ReceivePool();
  private readonly reader: FrameReader;
  private pull: PullOfConnection | undefined;
  private placed: PlacedChunkReader | undefined;
  /** Connected (TLS: secured, and the primary chose PAGES_ALPN). */
  private up = false;
  private finished = false;
  private accepted = false;

  constructor(o: PagesClientOptions) {
    this.reader = new FrameReader({
      accepts: {
        [FRAME.accepted]: 0,
        [FRAME.refused]: REFUSAL_BYTES_MAX,
        [FRAME.chunk]: o.maxMessageBytes,
        [FRAME.end]: 0,
      },
      // alone in its ArrayBuffer, moved to the device and back
      alloc: (bytes) => this.pool.take(bytes),
      payload: (kind, buf) => {
        const place = this.pull?.place;
        this.placed =
          kind === FRAME.chunk && this.accepted && place !== undefined
            ? new PlacedChunkReader(buf, place)
            : undefined;
        return this.placed;
      },
    });
    const onread: OnRead = {
      buffer: () => this.reader.target(),
      callback: (n: number) => {
        if (this.finished) return false;
        const r = this.reader.filled(n);
        if (r instanceof FrameError) this.finish(`pages socket: ${r.message}`, r.foreign);
        else if (r !== undefined) this.frame(r);
        return !this.finished;
      },
    };
    const { host, port } = hostPort(o.address);
    this.socket =
      o.tls === undefined
        ? netConnect({ host, port, noDelay: true, onread }, () => this.connected())
        : dialTls(host, port, o.tls, onread, (alpn) => {
            // An older primary offers h2 alone: it serves PullSnapshot, not this.
            if (alpn !== PAGES_ALPN) this.finish("the primary offers no pages socket", true);
            else this.connected();
          });
    this.socket.on("error", (e) => this.finish(e.message));
    this.socket.on("close", () =>
      this.finish(
        this.accepted
          ? "connection closed mid-pull"
          : this.reader.greeted
            ? "connection closed before the primary's answer"
            : "connection closed",
      ),
    );
  }

  /** Waiting for a pull, and usable for one. */
  get idle(): boolean {
    return this.pull === undefined && !this.finished;
  }

  /** Gives the connection its pull: the hello goes now if the connection is up. */
  attach(pull: PullOfConnection): () => void {
    this.pull = pull;
    if (this.up) this.hello();
    return () => this.finish("cancelled");
  }

  /** Up: the magic goes at once (the primary's port routes the connection on it). */
  private connected(): void {
    this.up = true;
    this.socket.write(PAGES_MAGIC);
    if (this.pull !== undefined) this.hello();
  }

  private hello(): void {
    traceSnapshotChunk("s.pullConnected", 0);
    const bytes = toBinary(wire.StandbyMessageSchema, encodeStandbyMessage(this.pull!.request));
    this.socket.write(frameOf(FRAME.hello, bytes));
  }

  private frame(f: Frame): void {
    const pull = this.pull;
    if (pull === undefined) {
      this.finish(`pages socket: frame ${f.kind} before any hello`);
    } else if (f.kind === FRAME.refused) {
      const r = parseRefused(f.payload);
      this.finish(`${ErrorCode[r.code as ErrorCode] ?? r.code}: ${r.message}`);
    } else if (!this.accepted) {
      if (f.kind === FRAME.accepted) {
        this.accepted = true;
        traceSnapshotChunk("s.pullAccepted", 0);
      } else this.finish(`pages socket: frame ${f.kind} before the primary's answer`);
    } else if (f.kind === FRAME.chunk && f.parsed !== undefined) {
      const m = f.parsed as PrimaryMessage;
      const allPlaced = this.placed!.allPlaced;
      this.placed = undefined;
      pull.deliver(allPlaced ? m : withPooledPages(m, f.payload, this.pool));
      // Only heads were read into it: nothing views it any more.
      if (allPlaced) this.pool.give([f.payload.buffer as ArrayBuffer]);
    } else if (f.kind === FRAME.chunk) {
      const m = chunkOf(f.payload);
      if (m instanceof Error) this.finish(`malformed message: ${m.message}`);
      else pull.deliver(withPooledPages(m, f.payload, this.pool));
    } else if (f.kind === FRAME.end) this.finish("");
    else this.finish(`pages socket: frame ${f.kind} after the answer`);
  }

  /** Ends the connection; a pull attached is told why (an idle one ends quietly). */
  private finish(reason: string, foreign = false): void {
    if (this.finished) return;
    this.finished = true;
    this.pool.close();
    this.socket.destroy();
    this.pull?.done(reason, foreign);
  }
}

/** Mutual TLS as the replication stream's, offering PAGES_ALPN (h2 too, so an older primary
 * completes the handshake and is told apart rather than logging a refusal). */
function dialTls(
  host: string,
  port: number,
  tls: NonNullable<PagesClientOptions["tls"]>,
  onread: OnRead,
  secured: (alpn: string | false | null) => void,
): Socket {
  const options: ConnectionOptions & { onread: OnRead } = {
    host,
    port,
    ca: tls.files.ca,
    cert: tls.files.cert,
    key: tls.files.key,
    servername: tls.peerName,
    checkServerIdentity: serverIdentity(tls.peerName),
    ALPNProtocols: [PAGES_ALPN, "h2"],
    onread, // tls.connect takes it as net.connect does (Node's documentation of tls.connect)
  };
  const socket: TLSSocket = tlsConnect(options, () => {
    socket.setNoDelay(true);
    secured(socket.alpnProtocol);
  });
  return socket;
}

interface OnRead {
  buffer: () => Uint8Array;
  callback: (n: number) => boolean;
}

/**
 * A chunk whose pages view its frame's buffer alone (taken from the pull's pool) is marked
 * pagesOwned, with pagesReturn giving the buffer back to the pool once the device wrote it.
 * Pages in any other buffer (none expected) leave the chunk as it is: the device copies them.
 * Pages read in place are left out of the account (they are written already).
 */
export function withPooledPages(
  m: PrimaryMessage,
  payload: Uint8Array,
  pool: ReceivePool,
): PrimaryMessage {
  if (m.kind !== "snapshot" || m.chunk.pages.length === 0) return m;
  // Runs read in place (PlacedChunkReader) are not in the buffer and are not written again.
  const pages = m.chunk.pages.filter((p) => p.placed !== true);
  if (pages.length === 0 || !pages.every((p) => p.data.buffer === payload.buffer)) return m;
  const pagesReturn = (buffers: readonly ArrayBuffer[]) => pool.give(buffers);
  return { ...m, chunk: { ...m.chunk, pagesOwned: true, pagesReturn } };
}

function chunkOf(payload: Uint8Array): PrimaryMessage | Error {
  let w: wire.PrimaryMessage;
  try {
    w = fromBinary(wire.PrimaryMessageSchema, payload);
  } catch (e) {
    return e as Error;
  }
  const m = decodePrimaryMessage(w);
  if (m instanceof Error) return m;
  if (m.kind !== "snapshot") return new Error(`a ${m.kind} message on the pages socket`);
  return m;
}

const serverIdentity = (peerName: string) => (_host: string, cert: { subject?: unknown }) => {
  const names = certificateNames(cert as Parameters<typeof certificateNames>[0]);
  return names.includes(peerName)
    ? undefined
    : new Error(`peer certificate names ${names.join(", ") || "nothing"}, not ${peerName}`);
};

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  return {
    host: address.slice(0, i).replace(/^\[(.*)\]$/, "$1"),
    port: Number(address.slice(i + 1)),
  };
}
