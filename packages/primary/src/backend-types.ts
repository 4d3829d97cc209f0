// What the guest service needs of the paravirtual backend.
import type { Backend as ModelBackend } from "@vgpu-ha/gpu-model";

export type Backend = ModelBackend;
export type SessionRecordLike = NonNullable<ReturnType<ModelBackend["sessions"]["get"]>>;
