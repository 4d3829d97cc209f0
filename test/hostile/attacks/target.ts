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

/**
 * The address an attack connects from: on IPv4 loopback its own (127.0.0.2), as a real
 * attacker has its own — the node's penalty box then holds back the attacker, not the normal
 * guest (127.0.0.1) beside it; elsewhere (namespaces, an operator's target) the system's choice.
 */
export function attackerAddress(host: string): { localAddress?: string } {
  return isIP(host) === 4 && host.startsWith("127.") ? { localAddress: "127.0.0.2" } : {};
}
