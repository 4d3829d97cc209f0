// Where an attack may be aimed: loopback, or (with the operator's word) a host they own.
import { isIP } from "node:net";

export function splitTarget(target: string): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(target);
  const port = Number(m?.[2]);
  if (!m || !(port > 0 && port < 65536)) throw new Error(`target ${target} is not HOST:PORT`);
  return { host: m[1]!, port };
}

/** Whether `host` is this machine's loopback (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  if (host === "localhost" || host === "::1") return true;
  return isIP(host) === 4 && host.startsWith("127.");
}
