// Which builds may replicate to each other. Each node announces, in its replication hello, its
// package version and the replication protocol version it speaks. The rule: the same protocol
// version. Package versions may differ within one protocol version, so one node at a time can
// be upgraded while the other keeps serving (a rolling upgrade); a build that changes the wire
// or its meaning bumps REPLICATION_PROTOCOL_VERSION, and then both nodes must be upgraded
// together (docs/operations.md, "Upgrade").

/**
 * The replication protocol this build speaks. 1: the protocol of docs/replication.md as first
 * released, including builds from before versions were announced in the hello. 2: packed entry
 * batches version 2 (names interned per stream, not per batch: wire/entry-pack.ts).
 */
export const REPLICATION_PROTOCOL_VERSION = 2;

/** Highest protocol version a node may claim (config testing.protocolVersion's bound too). */
export const PROTOCOL_VERSION_MAX = 1000;

/** What a node runs. */
export interface NodeVersion {
  /** Its package version, for people: "0.1.0". Not compared. */
  readonly version: string;
  readonly protocolVersion: number;
}

/** What a hello announces: absent fields are a build from before versions were announced. */
export interface AnnouncedVersion {
  readonly version?: string;
  readonly protocolVersion?: number;
}

/** The protocol a hello's sender speaks (absent: a build before announcements, protocol 1). */
export function announcedProtocol(a: AnnouncedVersion): number {
  return a.protocolVersion ?? 1;
}

/** The peer's version as known from its hello ("unknown" for a build that did not say). */
export function announcedVersion(a: AnnouncedVersion): NodeVersion {
  return { version: a.version ?? "unknown", protocolVersion: announcedProtocol(a) };
}

/** True when a node running `own` may replicate with a peer that announced `theirs`. */
export function compatibleVersions(own: NodeVersion, theirs: AnnouncedVersion): boolean {
  return own.protocolVersion === announcedProtocol(theirs);
}

/** "vgpud 0.2.0 (replication protocol 2)": how versions read in logs, errors and status. */
export function describeVersion(v: NodeVersion): string {
  return `vgpud ${v.version} (replication protocol ${v.protocolVersion})`;
}
