// Proves a node refuses bad TLS material at start with a line naming the field: certificates
// made by deploy/examples/make-certs.sh (openssl) in a temp dir, then broken one way at a time.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../config/load.js";
import { certificateNames } from "./cert-names.js";
import { checkCertificateNames, readTlsFiles } from "./tls-files.js";

const SCRIPT = fileURLToPath(new URL("../../../../deploy/examples/make-certs.sh", import.meta.url));
let dir: string;
const at = (f: string) => join(dir, f);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "vgpu-tls-files-"));
  execFileSync(SCRIPT, [at("one"), "node-a", "node-b"], { stdio: "ignore" });
  execFileSync(SCRIPT, [at("other"), "node-a"], { stdio: "ignore" });
  writeFileSync(at("garbage.pem"), "not a certificate\n");
  // A CA file with two CAs, the node's own second: either may sign.
  execFileSync("sh", [
    "-c",
    `cat ${at("other/ca.crt")} ${at("one/ca.crt")} > ${at("two-cas.crt")}`,
  ]);
  copyFileSync(at("one/node-a.crt"), at("node-a-copy.crt"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const good = () => ({
  ca: at("one/ca.crt"),
  cert: at("one/node-a.crt"),
  key: at("one/node-a.key"),
});

function refusal(files: Parameters<typeof readTlsFiles>[0], nowMs?: number): string {
  try {
    readTlsFiles(files, nowMs);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error("accepted");
}

describe("readTlsFiles", () => {
  it("reads a CA, a certificate and its key, and the names the certificate carries", () => {
    const files = readTlsFiles(good());
    expect(files.names).toEqual(["node-a"]);
    expect(files.ca.toString()).toContain("BEGIN CERTIFICATE");
    expect(files.key.toString()).toContain("PRIVATE KEY");
  });

  it("accepts a CA file holding several CAs", () => {
    expect(readTlsFiles({ ...good(), ca: at("two-cas.crt") }).names).toEqual(["node-a"]);
  });

  it("names the field of a missing or unreadable file", () => {
    expect(refusal({ ...good(), ca: at("nope.crt") })).toBe(
      `config: tls.ca = ${JSON.stringify(at("nope.crt"))}: cannot read: ENOENT`,
    );
    expect(refusal({ ...good(), key: dir })).toMatch(
      /^config: tls\.key = ".*": cannot read: EISDIR$/,
    );
  });

  it("names the field holding something else than it should", () => {
    expect(refusal({ ...good(), cert: at("garbage.pem") })).toMatch(
      /^config: tls\.cert = ".*garbage\.pem": no PEM certificate in the file$/,
    );
    expect(refusal({ ...good(), ca: at("one/node-a.key") })).toMatch(
      /^config: tls\.ca = .*: no PEM certificate in the file$/,
    );
    expect(refusal({ ...good(), key: at("one/node-a.crt") })).toMatch(
      /^config: tls\.key = .*: not a PEM private key/,
    );
  });

  it("refuses a key that is not the certificate's", () => {
    expect(refusal({ ...good(), key: at("one/node-b.key") })).toMatch(
      /^config: tls\.key = .*node-b\.key": not the key of the certificate .*node-a\.crt$/,
    );
  });

  it("refuses a certificate another CA signed", () => {
    expect(refusal({ ...good(), ca: at("other/ca.crt") })).toMatch(
      /^config: tls\.cert = .*: not signed by the CA in .*other\/ca\.crt$/,
    );
    expect(refusal({ ...good(), ca: at("node-a-copy.crt") })).toMatch(/not signed by the CA/);
  });

  it("refuses a certificate that is not valid at the time", () => {
    const later = Date.now() + 1000 * 86400 * 1000;
    expect(refusal(good(), later)).toMatch(/^config: tls\.cert = .*: not valid now \(.* to .*\)$/);
  });
});

describe("checkCertificateNames", () => {
  const config = (nodeId: string, peer: string) => ({ nodeId, peer: { name: peer }, tls: good() });

  it("takes a certificate naming nodeId and not peer.name", () => {
    expect(() =>
      checkCertificateNames(config("node-a", "node-b"), { names: ["node-a"] }),
    ).not.toThrow();
  });

  it("refuses a certificate that does not name nodeId, or names peer.name too", () => {
    const check = (nodeId: string, names: string[]) => () =>
      checkCertificateNames(config(nodeId, "node-b"), { names });
    expect(check("host-a", ["node-a"])).toThrow(ConfigError);
    expect(check("host-a", ["node-a"])).toThrow(
      /^config: tls\.cert = ".*node-a\.crt": names node-a, not nodeId host-a$/,
    );
    expect(check("node-a", ["node-a", "node-b"])).toThrow(
      /^config: tls\.cert = .*: names peer\.name node-b too \(node-a, node-b\)$/,
    );
  });
});

describe("certificateNames", () => {
  it("takes the CN and DNS subjectAltNames of a peer certificate, once each", () => {
    expect(
      certificateNames({
        subject: { CN: "host-a" } as never,
        subjectaltname: "DNS:host-a, IP Address:10.0.0.1, DNS:host-a.example",
      }),
    ).toEqual(["host-a", "host-a.example"]);
    expect(certificateNames({ subject: {} as never, subjectaltname: undefined as never })).toEqual(
      [],
    );
  });
});
