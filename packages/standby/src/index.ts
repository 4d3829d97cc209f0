// The standby role (replication receiver, in-order apply, lease watch, promotion) arrives with
// the Replication issue; until then a node runs standalone (see packages/daemon).
export const STANDBY_ROLE = "standby" as const;
