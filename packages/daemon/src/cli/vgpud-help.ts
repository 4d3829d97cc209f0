// vgpud's exit codes and the part of `vgpud --help` after the options: environment, exit codes,
// files and where the documentation is. Kept in step with deploy/man/vgpud.8 and docs/configuration.md.

export const VgpudExit = {
  /** --help, --version, --print-config or --check done; or stopped by SIGTERM/SIGINT. */
  ok: 0,
  /** The config was valid but the node failed to start or crashed (systemd restarts it). */
  startFailed: 1,
  /**
   * An invalid config, tls files, host check or command line; the webgpu backend did not start
   * (no adapter, a golden vector differs); or the primary's device runs another kernel
   * contract: a restart would not help.
   */
  config: 2,
  /**
   * The device failed (work past device.maxCallMs, or its thread died): the node stepped down
   * so the standby takes over. systemd restarts it; it joins as a standby with a fresh device.
   */
  deviceFailed: 3,
} as const;

export type VgpudExit = (typeof VgpudExit)[keyof typeof VgpudExit];

export const VGPUD_HELP = `
Environment:
  VGPU_CONFIG         the config file when --config is not given
  VGPU_<FIELD>        overrides one config field: strip VGPU_, split levels at __, UPPER_SNAKE
                      for camelCase; the value is JSON when it parses, else a string
                        VGPU_DEVICE__VRAM_BYTES=1GiB   device.vramBytes
                        VGPU_OPS__TOKEN=...            ops.token (the admin token)
                        VGPU_TENANTS='[{"name":"a","token":"..."}]'   tenants (whole list)
                      an unknown VGPU_* variable stops vgpud (exit 2) naming the variable;
                      VGPU_NODES and VGPU_TOKEN are vgpuctl's old names and are ignored

Exit codes:
  0  done (--help, --version, --print-config, --check, --check-gpu), or stopped by SIGTERM/SIGINT
  1  the config is valid but the node failed to start (a fatal log line says why)
  2  invalid config, tls files, host check (memory, ports with --check) or command line:
     one line per problem, naming the field ("config: guest.listen = ...: ..."); the webgpu
     backend did not start (no adapter, or a golden vector differs: the kernel is named); or,
     on a standby, the primary's device runs another kernel contract
  3  the device failed (work past device.maxCallMs, or the device thread died): the node
     stepped down so its standby takes over; restarted, it joins as a standby

Files:
  /etc/vgpu-ha/vgpud.yaml            the config (the systemd unit passes --config)
  /etc/vgpu-ha/vgpud.env             secrets as VGPU_* variables (read by systemd)
  /etc/vgpu-ha/examples/             host-a.yaml, host-b.yaml, host-a-etcd.yaml, standalone.yaml
  /var/lib/vgpu-ha/epoch             the persisted epoch (stateDir)

Documentation: man vgpud, docs/configuration.md (every field), docs/operations.md
(install, upgrade, removal); in the package also /usr/share/doc/vgpu-ha/.`;
