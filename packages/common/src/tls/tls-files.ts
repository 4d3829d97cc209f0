// The TLS material of a node, read once at start from the files named in `tls` and checked so
// that a mistake stops the node with a line naming the field (like every other config error)
// instead of surfacing later as a refused handshake: each file readable and of the right kind,
// the key the certificate's, the certificate signed by the CA and valid now.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError } from "../config/load.js";
import type { Config } from "../config/schema.js";
import { certificateNames } from "./cert-names.js";

export interface TlsFiles {
  /** PEM of the CA certificate(s). */
  readonly ca: Buffer;
  /** PEM of this node's certificate (chain). */
  readonly cert: Buffer;
  /** PEM of this node's private key. */
  readonly key: Buffer;
  /** The names this node's certificate carries (CN and DNS subjectAltNames). */
  readonly names: readonly string[];
}

type TlsConfig = NonNullable<Config["tls"]>;

const problem = (field: keyof TlsConfig, path: string, why: string) =>
  new ConfigError(`config: tls.${field} = ${JSON.stringify(path)}: ${why}`);

function read(config: TlsConfig, field: keyof TlsConfig): Buffer {
  try {
    return readFileSync(config[field]);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw problem(field, config[field], `cannot read: ${err.code ?? err.message}`);
  }
}

/** Every PEM certificate in a file, in order (a CA file may hold several). */
function certificates(config: TlsConfig, field: "ca" | "cert", pem: Buffer): X509Certificate[] {
  const blocks = pem
    .toString("utf8")
    .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
  if (!blocks) throw problem(field, config[field], "no PEM certificate in the file");
  try {
    return blocks.map((b) => new X509Certificate(b));
  } catch (e) {
    throw problem(field, config[field], `not a valid certificate: ${(e as Error).message}`);
  }
}

/** Reads and checks the files; throws ConfigError naming the field at the first problem. */
export function readTlsFiles(config: TlsConfig, nowMs = Date.now()): TlsFiles {
  const ca = read(config, "ca");
  const cert = read(config, "cert");
  const key = read(config, "key");
  const authorities = certificates(config, "ca", ca);
  const [leaf] = certificates(config, "cert", cert);
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch (e) {
    throw problem("key", config.key, `not a PEM private key: ${(e as Error).message}`);
  }
  if (!leaf!.checkPrivateKey(privateKey)) {
    throw problem("key", config.key, `not the key of the certificate ${config.cert}`);
  }
  const from = Date.parse(leaf!.validFrom);
  const to = Date.parse(leaf!.validTo);
  if (!(nowMs >= from && nowMs <= to)) {
    throw problem("cert", config.cert, `not valid now (${leaf!.validFrom} to ${leaf!.validTo})`);
  }
  // A chain file is signed at its end by the CA; a single certificate directly.
  const chain = certificates(config, "cert", cert);
  const top = chain.at(-1)!;
  if (!authorities.some((a) => top.checkIssued(a) && top.verify(a.publicKey))) {
    throw problem("cert", config.cert, `not signed by the CA in ${config.ca}`);
  }
  return { ca, cert, key, names: certificateNames(leaf!) };
}

/**
 * The certificate must name this node (its nodeId, which the peer has as peer.name) and must
 * not name the peer: a certificate naming both would let its holder pose as either node.
 */
export function checkCertificateNames(
  config: { nodeId: string; peer: { name: string }; tls?: TlsConfig | undefined },
  files: Pick<TlsFiles, "names">,
): void {
  if (!config.tls) return;
  const names = files.names.join(", ") || "no name";
  if (!files.names.includes(config.nodeId)) {
    throw problem("cert", config.tls.cert, `names ${names}, not nodeId ${config.nodeId}`);
  }
  if (files.names.includes(config.peer.name)) {
    throw problem("cert", config.tls.cert, `names peer.name ${config.peer.name} too (${names})`);
  }
}
