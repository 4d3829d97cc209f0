// What a node checks before it starts, beyond the schema: the host can back the config
// (device.vramBytes), and the tls files are readable, right and name this node. A failure is a
// ConfigError naming the field: vgpud exits 2, which systemd does not restart.
import {
  type Config,
  checkCertificateNames,
  checkHost,
  type HostFacts,
  hostFacts,
  readTlsFiles,
  type TlsFiles,
} from "@vgpu-ha/common";

/** Throws a ConfigError at the first problem; returns the tls files when the config has them. */
export function checkBeforeStart(
  config: Config,
  host: HostFacts = hostFacts(),
): TlsFiles | undefined {
  checkHost(config, host);
  if (!config.tls) return undefined;
  const files = readTlsFiles(config.tls);
  checkCertificateNames(config, files);
  return files;
}
