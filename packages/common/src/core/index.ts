// The pure core of @vgpu-ha/common (subpath `@vgpu-ha/common/core`): the domain types of the
// calls, the protocol machines, the error catalogue without its gRPC column, and Clock. Nothing
// reachable from here loads grpc, TLS, HTTP, the disk, logging or metrics (test/purity checks
// it): the GPU model and every `core/` folder import this, never the package's barrel.
export * from "../calls.js";
export * from "./clock.js";
export * from "./entries.js";
export * from "./errors.js";
export * from "./etcd-lease.js";
export * from "./failover.js";
export * from "./lease.js";
export * from "./lease-channel.js";
export * from "./lineage.js";
export * from "./log.js";
export * from "./messages.js";
export * from "./node-machine.js";
export * from "./pages-wire.js";
export * from "./peer-identity.js";
export * from "./peer-version.js";
export * from "./ports.js";
export * from "./release.js";
export * from "./resync-progress.js";
export * from "./retained-slabs.js";
export * from "./role-change.js";
export * from "./snapshot.js";
