// The node's configuration: one schema, validated at start. Every field has a default that is
// safe for the local demo; docs/configuration.md documents each with its unit.
import { z } from "zod";
import { checkEtcdLeaseTerms } from "../core/etcd-lease.js";
import { checkLeaseTerms } from "../core/lease.js";
import { PROTOCOL_VERSION_MAX } from "../core/peer-version.js";
import { REPLICATION_MODES } from "../core/release.js";
import { listenerClash, portOf, sharedToken } from "./relations.js";

const UNITS: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** Bytes, as a number or a string such as "64MiB". */
const bytes = (min: number, max: number) =>
  z.preprocess(
    (v) => {
      if (typeof v !== "string") return v;
      const m = /^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?\s*$/.exec(v);
      return m ? Math.round(Number(m[1]) * UNITS[m[2] ?? "B"]!) : v;
    },
    z
      .number()
      .int()
      .min(min, `must be at least ${min} bytes`)
      .max(max, `must be at most ${max} bytes`),
  );

/** An HTTP/2 flow-control window: at least HTTP/2's default, at most its largest (2^31 - 1). */
const windowBytes = bytes(65_535, 2 ** 31 - 1);

const count = (min: number, max: number) => z.number().int().min(min).max(max);

/** host:port, port 0 meaning "any free port". */
const address = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be host:port")
  .refine((a) => portOf(a) <= 65535, "port must be 0 to 65535");

export const TenantSchema = z
  .strictObject({
    name: z.string().min(1).max(64),
    /** Bearer token of the tenant's guests (optional when certificateName is set). */
    token: z.string().min(8, "must be at least 8 characters").optional(),
    vramQuotaBytes: bytes(4096, 2 ** 40).default(1024 ** 3),
    boQuota: count(1, 1_000_000).default(4096),
    /** Contexts the tenant may hold at once, over all its sessions. */
    contextQuota: count(1, 1_000_000).default(4096),
    /**
     * With guest.tls on: a guest whose client certificate (signed by tls.ca) names this, as its
     * CN or a DNS subjectAltName, may open sessions of this tenant without the token.
     */
    certificateName: z.string().min(1).max(253).optional(),
  })
  .refine((t) => t.token !== undefined || t.certificateName !== undefined, {
    message: "a tenant needs a token or a certificateName",
    path: ["token"],
  });

/** A file the node reads at start (checked then: readable, and what it should hold). */
const filePath = z.string().min(1).max(4096);

const ms = (min: number, max: number) => z.number().int().min(min).max(max);

export const ConfigSchema = z
  .strictObject({
    nodeId: z.string().min(1).max(64).default("node-a"),
    /** Both nodes of a pair share it; a peer of another cluster is refused. */
    clusterId: z.string().min(1).max(64).default("vgpu-local"),
    /** standalone: no peer. primary: serves guests and streams to peer. standby: replicates. */
    role: z.enum(["standalone", "primary", "standby"]).default("standalone"),
    stateDir: z.string().min(1).default(".vgpu-state"),
    guest: z
      .strictObject({
        listen: address.default("127.0.0.1:7400"),
        maxMessageBytes: bytes(64 * 1024, 1024 ** 3).default(64 * 1024 ** 2),
        /** Frames a session may have sent but not yet acknowledged. */
        maxFramesInFlight: count(1, 65536).default(1024),
        /**
         * off: plaintext. server: TLS with the node's certificate (tls.cert); a guest may show a
         * client certificate, which must be signed by tls.ca. mutual: a client certificate
         * signed by tls.ca is required.
         */
        tls: z.enum(["off", "server", "mutual"]).default("off"),
        /** Streams (sessions) one guest connection may have open at once (HTTP/2). */
        maxStreamsPerConnection: count(1, 1_000_000).default(64),
        /**
         * A session with no stream attached for this long is closed by the primary (through the
         * log, so the standby frees the same), freeing its contexts, buffers and quota. 0: never.
         */
        sessionIdleSeconds: count(0, 31_536_000).default(600),
        /**
         * Connections one source address may hold open at once; more are closed at accept
         * (loopback guests are all one source).
         */
        maxConnectionsPerSource: count(1, 1_000_000).default(64),
        /**
         * New HTTP/2 streams a connection may open per second, on average (a token bucket)...
         * Past it the connection is closed (GOAWAY ENHANCE_YOUR_CALM) and its source penalised.
         */
        maxNewStreamsPerConnectionPerSecond: z.number().min(1).max(1_000_000).default(1000),
        /** ...and at most this many at once (the bucket's size). */
        newStreamBurstPerConnection: count(1, 1_000_000).default(2000),
        /**
         * Streams a connection resets within 1 s of opening them, per second on average
         * (HTTP/2 rapid reset); past it, as past the new-stream rate.
         */
        maxEarlyResetsPerConnectionPerSecond: z.number().min(1).max(1_000_000).default(50),
        /** ...and at most this many at once. */
        earlyResetBurstPerConnection: count(1, 1_000_000).default(200),
        /** How long a penalised source's new connections are closed at once. */
        abusePenaltyMs: ms(0, 3_600_000).default(30_000),
        /** A stream that sends no first message (Open) for this long is closed. */
        openTimeoutMs: ms(100, 600_000).default(10_000),
        /**
         * HTTP/2 receive window of each guest stream: what a guest may send ahead of the node
         * reading it, and about what a paused stream can make the node hold (docs/security.md).
         */
        streamWindowBytes: windowBytes.default(1024 ** 2),
        /** HTTP/2 receive window of each guest connection (bytes in flight on it). */
        connectionWindowBytes: windowBytes.default(4 * 1024 ** 2),
        /**
         * Bytes of an incomplete gRPC message a stream may make the node hold before its first
         * message (Open) has arrived whole; past it the stream is reset (docs/security.md).
         */
        maxIncompleteBytesBeforeOpen: bytes(64 * 1024, 1024 ** 3).default(256 * 1024),
        /**
         * ...all streams of one source address together (what their decoders keep of the
         * message each receives or received last); past it its largest is reset...
         */
        maxIncompleteBytesPerSource: bytes(64 * 1024, 2 ** 40).default(512 * 1024 ** 2),
        /** ...and all guest streams of the node: past it, the hungriest source's largest. */
        maxIncompleteBytesTotal: bytes(64 * 1024, 2 ** 40).default(1024 ** 3),
      })
      .prefault({}),
    ops: z
      .strictObject({
        listen: address.default("127.0.0.1:9400"),
        /** Bearer token for mutating endpoints; none means they are disabled. */
        token: z.string().min(16, "must be at least 16 characters").optional(),
        /**
         * Maintenance mode (vgpuctl pause) held longer than this raises the
         * VgpuMaintenancePausedTooLong alert (the metric vgpu_maintenance_paused_max_seconds).
         */
        maintenanceAlertAfterMs: ms(1000, 30 * 24 * 3_600_000).default(3_600_000),
      })
      .prefault({}),
    device: z
      .strictObject({
        /** Device-handle generator seed; give the two nodes different seeds. */
        seed: count(0, 0xffffffff).default(1),
        vramBytes: bytes(1024 ** 2, 2 ** 40).default(4 * 1024 ** 3),
        maxBoBytes: bytes(4096, 1024 ** 3).default(1024 ** 3),
        /**
         * Work units of one kernel launch (a unit costs about the same in every kernel: 1–3 ns
         * of the CPU model here). 2^28: the slowest kernel's largest launch lasts about 1 s
         * (bench/kernel-speed.ts), and a 1 GiB fill is legal.
         */
        maxKernelWork: count(1, 2 ** 40).default(2 ** 28),
        /**
         * Where the device (VRAM and kernels) runs: `worker`, its own thread, so no kernel
         * ever blocks the node's event loop; `inline`, on the event loop (as before #14: for
         * tools and tests that want everything in one thread).
         */
        thread: z.enum(["worker", "inline"]).default("worker"),
        /**
         * One piece of device work (a kernel, a copy…) not finished within this counts as a
         * failed GPU (as does the device thread's death): the node reports it and stops
         * serving. A generous multiple of the largest legal call (about 1 s).
         */
        maxCallMs: ms(100, 3_600_000).default(10_000),
        /**
         * What runs the device's work: `model`, the CPU model (device.thread says where);
         * `webgpu`, a GPU through Dawn (npm `webgpu`, loaded only then), which must give the
         * model's exact bits: it runs the golden vectors at start (docs/gpu.md).
         */
        backend: z.enum(["model", "webgpu"]).default("model"),
        webgpu: z
          .strictObject({
            /**
             * When the webgpu backend cannot start (no adapter, Dawn missing, a golden vector
             * differs): `exit`, vgpud exits 2 naming why (the kernel, for a golden vector);
             * `model`, it logs why and runs the CPU model instead.
             */
            onFailure: z.enum(["exit", "model"]).default("exit"),
            /** Flags for Dawn's create(), e.g. ["backend=vulkan"] (docs/gpu.md). */
            dawnFlags: z.array(z.string().min(1).max(200)).max(32).default([]),
            /**
             * The longest interval between two of Dawn's event polls while GPU work is pending,
             * in µs (a wait's polls start 10 µs apart and double up to it); 0 polls every
             * event-loop turn, as Dawn itself does (docs/gpu.md, "Speed").
             */
            eventIntervalUs: z.number().int().min(0).max(10_000).default(200),
          })
          .prefault({}),
      })
      .prefault({}),
    limits: z
      .strictObject({
        /** Largest DMA read or write of one call; at most half of guest.maxMessageBytes. */
        maxDmaBytes: bytes(1, 1024 ** 3).default(16 * 1024 ** 2),
        maxStoresPerBatch: count(1, 1 << 20).default(65536),
        replyCacheFrames: count(1, 1 << 20).default(4096),
        replyCacheBytes: bytes(0, 1024 ** 3).default(64 * 1024 ** 2),
        /** Sessions one tenant may hold open at once (a stream need not be attached). */
        maxSessionsPerTenant: count(1, 1_000_000).default(256),
        /** Sessions of all tenants together. */
        maxSessionsTotal: count(1, 1_000_000).default(1024),
        /** New sessions per second per tenant, on average (a token bucket; resumes are free). */
        sessionOpensPerSecond: z.number().min(0.001).max(1_000_000).default(100),
        /** ...and at most this many at once (the bucket's size). */
        sessionOpenBurst: count(1, 1_000_000).default(200),
        /**
         * Frames of one tenant the node may refuse per second, on average (a token bucket):
         * past it, the tenant's frames wait until the budget refills (a flood of bad input
         * costs the node no more than this). Replayed replies do not count.
         */
        refusedFramesPerSecond: z.number().min(1).max(10_000_000).default(1000),
        /** ...and at most this many at once (the bucket's size). */
        refusedFramesBurst: count(1, 10_000_000).default(2000),
      })
      .prefault({}),
    tenants: z
      .array(TenantSchema)
      .min(1)
      .default([
        {
          name: "demo",
          token: "demo-token",
          vramQuotaBytes: 1024 ** 3,
          boQuota: 4096,
          contextQuota: 4096,
        },
      ]),
    replication: z
      .strictObject({
        /** Where this node serves vgpu.v1.Replication (used while it is the standby). */
        listen: address.default("127.0.0.1:7500"),
        /**
         * When a guest's frame is acknowledged (besides the primary having its result):
         * sync: once the standby has received it and everything before it (DRBD B);
         * sync-applied: once the standby has applied them (DRBD C); async: at once.
         */
        mode: z.enum(REPLICATION_MODES).default("sync"),
        /** Guests are held back while the standby lags by more than this (entries or bytes). */
        maxLagEntries: count(1, 10_000_000).default(200_000),
        maxLagBytes: bytes(1024 ** 2, 2 ** 40).default(512 * 1024 ** 2),
        /**
         * ...or by entries older than this. Heartbeats queue behind the backlog, so a lag near
         * the lease would starve the primary's lease: the default is 40 % of lease.durationMs.
         */
        maxLagMs: ms(1, 600_000).optional(),
        /**
         * ...or by entries received but not applied for longer than this. A standby takes
         * over only after applying its whole received backlog, so this bounds how much a
         * takeover adds to the lease: the default is lease.durationMs.
         */
        maxApplyLagMs: ms(1, 600_000).optional(),
        /**
         * The standby holds each entry's device work until the primary's device has done it,
         * so a frame that hangs a device never runs on both nodes at once (the primary's
         * watchdog fires, the standby takes over and answers it DEVICE_FAULT). Absent: on in
         * async and sync, off in sync-applied (there it would put the two devices in series
         * in every reply's path). Set on the primary; it tells its standby in its hello.
         */
        holdStandbyDevice: z.boolean().optional(),
        /** Applied entries kept so a reconnecting standby resumes without a snapshot. */
        retainBytes: bytes(0, 2 ** 40).default(64 * 1024 ** 2),
        maxBatchEntries: count(1, 65536).default(1024),
        maxBatchBytes: bytes(4096, 64 * 1024 ** 2).default(1024 ** 2),
        maxInflightEntries: count(1, 10_000_000).default(200_000),
        maxInflightBytes: bytes(64 * 1024, 2 ** 40).default(64 * 1024 ** 2),
        snapshotChunkBytes: bytes(4096, 64 * 1024 ** 2).default(1024 ** 2),
        snapshotWindowChunks: count(1, 1024).default(16),
        /**
         * HTTP/2 receive windows of the replication port's streams and connections (the
         * standby receiving entry batches; a primary receiving acknowledgements).
         */
        streamWindowBytes: windowBytes.default(4 * 1024 ** 2),
        connectionWindowBytes: windowBytes.default(8 * 1024 ** 2),
        /** Resend from the last acknowledged entry when acks stop for this long. */
        retransmitMs: ms(10, 600_000).default(2000),
        /** Delay before the primary dials its standby again after a broken link. */
        reconnectMs: ms(10, 60_000).default(200),
      })
      .prefault({}),
    lease: z
      .strictObject({
        /**
         * peer: the standby's acknowledgements renew the primary's lease (two hosts alone).
         * etcd: an etcd cluster arbitrates; the primary serves only while it holds the leader
         * key (partition-safe; see lease.etcd).
         */
        mode: z.enum(["peer", "etcd"]).default("peer"),
        /** A primary not renewed for this long stops acknowledging; a standby may take over. */
        durationMs: ms(30, 600_000).default(500),
        /** How often the primary sends a heartbeat (at most a third of the lease). */
        heartbeatMs: ms(5, 60_000).default(100),
        /** How much earlier than the standby the primary gives its lease up. */
        driftMarginMs: ms(0, 600_000).default(50),
        /** Largest relative difference of the two hosts' clock rates the margin must cover. */
        maxDriftRatio: z.number().min(0).max(0.1).default(0.01),
        /**
         * The lease thread (peer mode): heartbeats and their acknowledgements also travel on a
         * thread of their own over UDP (the replication port number), so a busy main loop does
         * not cost the lease. It renews only while the main loop has turned within this long:
         * a hung primary keeps its lease at most watchdogMs + durationMs. 0: no lease thread
         * (the lease rides on the replication stream alone).
         */
        watchdogMs: ms(0, 60_000).default(2000),
        etcd: z
          .strictObject({
            /** etcd client URLs, e.g. http://10.0.0.9:2379. */
            endpoints: z
              .array(z.url({ protocol: /^https?$/ }))
              .max(16)
              .default([]),
            /** Keys live under <prefix>/<clusterId>/. */
            prefix: z
              .string()
              .regex(/^\/[A-Za-z0-9._/-]*$/, "must start with / and use A-Z a-z 0-9 . _ - /")
              .default("/vgpu-ha"),
            /** The etcd lease's time to live (whole seconds; etcd's minimum is about 2 s). */
            ttlMs: ms(2000, 600_000)
              .refine((v) => v % 1000 === 0, "must be whole seconds")
              .default(2000),
            /** How often the primary renews it (at most a third of the TTL). */
            keepaliveMs: ms(50, 200_000).default(500),
            /** How often a standby reads the leader key when it might take over. */
            pollMs: ms(20, 60_000).default(100),
            /** Deadline of each etcd request. */
            requestTimeoutMs: ms(50, 60_000).default(1000),
          })
          .prefault({}),
      })
      .prefault({}),
    peer: z
      .strictObject({
        /**
         * The peer's nodeId. Required for a primary or standby: a replication hello or Probe
         * from any other node id (or another clusterId) is refused before its epoch is read.
         */
        name: z.string().max(64).default(""),
        /** The peer's replication address (the primary dials it). */
        replicationAddress: address.optional(),
        /**
         * Where the lease thread sends heartbeats (UDP); default: peer.replicationAddress.
         * Set it when the replication address is a proxy or a name that only carries TCP.
         */
        leaseAddress: address.optional(),
        /** The peer's guest address, given to guests that reach the wrong node. */
        guestAddress: address.optional(),
      })
      .prefault({}),
    mmio: z
      .strictObject({
        /** per-page: stores ship as one batch per dirty page; per-store: each store alone. */
        replication: z.enum(["per-page", "per-store"]).default("per-page"),
        /** A page batch leaves at the latest this long after its first store. */
        flushDelayMs: ms(0, 1000).default(1),
        /** ...or as soon as this many store bytes are pending. */
        flushBytes: bytes(64, 256 * 1024 ** 2).default(1024 ** 2),
      })
      .prefault({}),
    testing: z
      .strictObject({
        /**
         * Enables POST /v1/test/corrupt (divergence injection) and POST /v1/test/stall?ms=N
         * (blocks the main event loop). Test-only: never in production.
         */
        faultInjection: z.boolean().default(false),
        /**
         * The replication protocol version this node announces and accepts instead of its
         * build's (core/peer-version.ts), to test the refusal of an incompatible peer without
         * building another release. Test-only: never in production.
         */
        protocolVersion: z.number().int().min(1).max(PROTOCOL_VERSION_MAX).optional(),
        /**
         * The device thread sleeps this long before every kernel run (device.thread: worker),
         * to make slow standbys, received-but-unapplied backlogs and (above device.maxCallMs)
         * hung devices. Test-only: never in production.
         */
        kernelDelayMs: ms(0, 3_600_000).default(0),
        /**
         * The kernel contract version this node announces in its hello and checks its peer's
         * against, instead of its device's (docs/gpu-model.md, "Kernel contract"), to test the
         * refusal of a peer of another contract. Test-only: never in production.
         */
        kernelContractVersion: z.number().int().min(1).max(1000).optional(),
        /**
         * The module (a file path) the webgpu backend loads instead of @vgpu-ha/gpu-webgpu: a
         * test's stand-in with the same createWebGpuExecutor, to test the backend's selection,
         * identity and refusals on a host without a GPU. Test-only: never in production.
         */
        webgpuModule: z.string().min(1).optional(),
        /**
         * Only launches of this kernel are delayed by kernelDelayMs (a frame that hangs every
         * device while the rest run). Test-only: never in production.
         */
        kernelDelayOnly: z
          .string()
          .regex(/^[a-z0-9_]{1,64}$/)
          .optional(),
      })
      .prefault({}),
    log: z
      .strictObject({
        level: z
          .enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
          .default("info"),
      })
      .prefault({}),
    /**
     * PEM files for TLS. When set, the replication port and this node's replication client use
     * mutual TLS: each side shows its certificate (cert, key), which must be signed by ca and
     * name the other side's peer.name. guest.tls uses the same certificate.
     */
    tls: z
      .strictObject({
        /** The CA certificate(s) that sign both nodes' (and guests') certificates. */
        ca: filePath,
        /** This node's certificate (chain), CN or DNS subjectAltName = what its peer calls it. */
        cert: filePath,
        /** This node's private key. */
        key: filePath,
      })
      .optional(),
  })
  .refine((c) => c.role !== "primary" || c.peer.replicationAddress !== undefined, {
    message: "a primary needs peer.replicationAddress",
    path: ["peer", "replicationAddress"],
  })
  .refine((c) => c.limits.maxDmaBytes * 2 <= c.guest.maxMessageBytes, {
    message:
      "must be at most half of guest.maxMessageBytes (a DMA and its framing must fit a message)",
    path: ["limits", "maxDmaBytes"],
  })
  .superRefine((c, ctx) => {
    const why = checkLeaseTerms({
      leaseMs: c.lease.durationMs,
      heartbeatMs: c.lease.heartbeatMs,
      driftMarginMs: c.lease.driftMarginMs,
      maxDriftRatio: c.lease.maxDriftRatio,
    });
    if (why !== null) ctx.addIssue({ code: "custom", message: why, path: ["lease"] });
    if (c.lease.mode !== "etcd") return;
    const e = c.lease.etcd;
    if (e.endpoints.length === 0) {
      ctx.addIssue({
        code: "custom",
        message: "lease.mode etcd needs at least one endpoint",
        path: ["lease", "etcd", "endpoints"],
      });
    }
    const etcdWhy = checkEtcdLeaseTerms({
      ttlMs: e.ttlMs,
      keepaliveMs: e.keepaliveMs,
      driftMarginMs: c.lease.driftMarginMs,
      maxDriftRatio: c.lease.maxDriftRatio,
    });
    if (etcdWhy !== null) {
      ctx.addIssue({ code: "custom", message: etcdWhy, path: ["lease", "etcd"] });
    }
  })
  .refine((c) => c.lease.watchdogMs === 0 || c.lease.watchdogMs >= 2 * c.lease.heartbeatMs, {
    message: "must be 0 (no lease thread) or at least two heartbeats (lease.heartbeatMs)",
    path: ["lease", "watchdogMs"],
  })
  .refine((c) => c.role === "standalone" || c.peer.name !== "", {
    message:
      "required for a primary or standby: the peer's nodeId (only a peer naming itself so is believed)",
    path: ["peer", "name"],
  })
  .refine((c) => c.guest.tls === "off" || c.tls !== undefined, {
    message: "guest.tls needs the tls section (ca, cert, key)",
    path: ["guest", "tls"],
  })
  .refine((c) => c.guest.newStreamBurstPerConnection >= c.guest.maxStreamsPerConnection, {
    message:
      "must be at least guest.maxStreamsPerConnection (a guest resuming all its sessions at once opens that many)",
    path: ["guest", "newStreamBurstPerConnection"],
  })
  .refine((c) => c.guest.maxIncompleteBytesPerSource >= c.guest.maxMessageBytes, {
    message:
      "must be at least guest.maxMessageBytes (one whole message of a session must fit while it arrives)",
    path: ["guest", "maxIncompleteBytesPerSource"],
  })
  .refine((c) => c.guest.maxIncompleteBytesTotal >= c.guest.maxIncompleteBytesPerSource, {
    message: "must be at least guest.maxIncompleteBytesPerSource",
    path: ["guest", "maxIncompleteBytesTotal"],
  })
  .refine((c) => c.guest.maxIncompleteBytesBeforeOpen <= c.guest.maxIncompleteBytesPerSource, {
    message: "must be at most guest.maxIncompleteBytesPerSource",
    path: ["guest", "maxIncompleteBytesBeforeOpen"],
  })
  .refine((c) => c.limits.maxSessionsPerTenant <= c.limits.maxSessionsTotal, {
    message: "must be at most limits.maxSessionsTotal",
    path: ["limits", "maxSessionsPerTenant"],
  })
  .refine((c) => new Set(c.tenants.map((t) => t.name)).size === c.tenants.length, {
    message: "tenant names must be unique",
    path: ["tenants"],
  })
  .refine((c) => c.peer.name !== c.nodeId, {
    message: "must not be this node's own nodeId (peer.name is the other node's)",
    path: ["peer", "name"],
  })
  .superRefine((c, ctx) => {
    const clash = listenerClash({
      "guest.listen": c.guest.listen,
      "ops.listen": c.ops.listen,
      // A standalone node does not bind its replication port.
      ...(c.role !== "standalone" ? { "replication.listen": c.replication.listen } : {}),
    });
    if (clash !== null) {
      const [field, value, other] = clash;
      const message = `${JSON.stringify(value)} is also ${other}: each listener needs its own address`;
      ctx.addIssue({ code: "custom", message, path: field.split(".") });
    }
    const shared = sharedToken(c.tenants);
    if (shared !== null) {
      const [index, other] = shared;
      const message = `the same token as tenants.${other}: each tenant needs its own`;
      ctx.addIssue({ code: "custom", message, path: ["tenants", index, "token"] });
    }
  });

export type Config = z.infer<typeof ConfigSchema>;
export type TenantConfig = z.infer<typeof TenantSchema>;
