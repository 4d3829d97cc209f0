// The generated wire messages, re-exported in one place (gen/ is rewritten by `npm run generate`).
export * from "../gen/vgpu/v1/guest_pb.js";
export * from "../gen/vgpu/v1/replication_pb.js";
export * from "../gen/vgpu/v1/types_pb.js";
