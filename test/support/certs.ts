// Certificates for tests, made by the project's own deploy/examples/make-certs.sh (openssl)
// into a directory the caller removes.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The script, from test/support (vitest) or test/dist/support (compiled). */
export const MAKE_CERTS = `${fileURLToPath(new URL(".", import.meta.url)).replace(/\/test\/(dist\/)?support\/$/, "")}/deploy/examples/make-certs.sh`;

export interface CertFiles {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/** A CA in `dir` (made unless there is one) and a certificate per name; the files of each. */
export function makeCerts(dir: string, ...names: string[]): Record<string, CertFiles> {
  execFileSync(MAKE_CERTS, [dir, ...names], { stdio: "ignore" });
  return Object.fromEntries(
    names.map((n) => [
      n,
      { ca: join(dir, "ca.crt"), cert: join(dir, `${n}.crt`), key: join(dir, `${n}.key`) },
    ]),
  );
}
