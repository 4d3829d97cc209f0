// The names a certificate carries, as vgpu-ha compares them with peer.name and with a tenant's
// certificateName: the subject's CN and every DNS subjectAltName. Works on a peer certificate
// from a TLS socket and on an X509Certificate read from a file.
import type { X509Certificate } from "node:crypto";
import type { PeerCertificate } from "node:tls";

type Named = Pick<PeerCertificate, "subject" | "subjectaltname"> | X509Certificate;

export function certificateNames(cert: Named): string[] {
  const names: string[] = [];
  const subject = cert.subject as unknown;
  if (typeof subject === "string") {
    // X509Certificate: "CN=host-a\nO=…" (one attribute per line).
    for (const line of subject.split("\n")) if (line.startsWith("CN=")) names.push(line.slice(3));
  } else if (subject && typeof subject === "object") {
    const cn = (subject as Record<string, string | string[] | undefined>).CN;
    if (typeof cn === "string") names.push(cn);
    else if (Array.isArray(cn)) names.push(...cn);
  }
  const alt = ("subjectAltName" in cert ? cert.subjectAltName : cert.subjectaltname) ?? "";
  for (const part of alt.split(", ")) if (part.startsWith("DNS:")) names.push(part.slice(4));
  return [...new Set(names)];
}

/** Whether a certificate names `name` (exactly: no wildcards, no case folding). */
export function certificateNamed(cert: Named, name: string): boolean {
  return certificateNames(cert).includes(name);
}
