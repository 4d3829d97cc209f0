// The HTTP/2 connections one guest process keeps to a node, shared by its sessions: each
// carries at most `streamsPerConnection` sessions (the node's guest.maxStreamsPerConnection),
// and a session that finds them all full gets a new connection. grpc-js alone would put every
// session of the process on one connection (its subchannels are shared process-wide) and
// queue the 65th behind the node's HTTP/2 stream limit; here each pooled client has its own
// subchannel pool, so its own connection. A connection is closed LINGER_MS after its last
// session ended, unless another session took it meanwhile.
import type * as grpc from "@grpc/grpc-js";
import { createClient, type ServiceClient, wire } from "@vgpu-ha/common";

/** An idle connection stays this long for the next session (opens and resumes come in bursts). */
const LINGER_MS = 2000;

/** The node's default guest.maxStreamsPerConnection. */
export const DEFAULT_STREAMS_PER_CONNECTION = 64;

/** One session's place on a pooled connection; release it (once) when the stream is over. */
export interface PooledClient {
  readonly client: ServiceClient<typeof wire.Guest>;
  release(): void;
  /** The node refused a stream on this connection: it carries at most `limit` (learnt). */
  full(limit: number): void;
}

interface Slot {
  readonly client: ServiceClient<typeof wire.Guest>;
  streams: number;
  /** Refused a stream: no new session goes on it. */
  full: boolean;
  /** Closes the idle connection after LINGER_MS. */
  linger: NodeJS.Timeout | undefined;
}

class ChannelPool {
  readonly credentials: grpc.ChannelCredentials;
  private readonly endpoint: string;
  private readonly options: grpc.ChannelOptions;
  private readonly slots = new Set<Slot>();
  private streamsPerConnection: number;

  constructor(
    endpoint: string,
    credentials: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
    streamsPerConnection: number,
  ) {
    this.endpoint = endpoint;
    this.credentials = credentials;
    this.options = options;
    this.streamsPerConnection = streamsPerConnection;
  }

  acquire(): PooledClient {
    let slot: Slot | undefined;
    for (const s of this.slots) {
      if (!s.full && s.streams < this.streamsPerConnection) {
        slot = s;
        break;
      }
    }
    if (slot === undefined) {
      slot = {
        client: createClient(wire.Guest, this.endpoint, this.credentials, {
          ...this.options,
          "grpc.use_local_subchannel_pool": 1,
        }),
        streams: 0,
        full: false,
        linger: undefined,
      };
      this.slots.add(slot);
    }
    slot.streams++;
    clearTimeout(slot.linger);
    slot.linger = undefined;
    const s = slot;
    let released = false;
    return {
      client: s.client,
      release: () => {
        if (released) return;
        released = true;
        if (--s.streams > 0) return;
        s.linger = setTimeout(() => {
          if (s.streams > 0) return;
          this.slots.delete(s);
          s.client.close();
        }, LINGER_MS);
        s.linger.unref();
      },
      full: (limit) => {
        s.full = true;
        if (limit > 0) this.streamsPerConnection = Math.min(this.streamsPerConnection, limit);
      },
    };
  }
}

const pools = new Map<string, ChannelPool[]>();

/** A place for one more session on a connection to `endpoint` with these credentials. */
export function pooledClient(
  endpoint: string,
  credentials: grpc.ChannelCredentials,
  options: grpc.ChannelOptions,
  streamsPerConnection = DEFAULT_STREAMS_PER_CONNECTION,
): PooledClient {
  const key = `${endpoint} ${streamsPerConnection} ${JSON.stringify(options)}`;
  let list = pools.get(key);
  if (list === undefined) {
    list = [];
    pools.set(key, list);
  }
  let pool = list.find((p) => p.credentials._equals(credentials));
  if (pool === undefined) {
    pool = new ChannelPool(endpoint, credentials, options, streamsPerConnection);
    list.push(pool);
  }
  return pool.acquire();
}
