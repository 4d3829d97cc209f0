// Proves deploy/alertmanager/alertmanager.yml: `amtool check-config` accepts it and routes a
// vgpu alert to its receiver; its inhibit rules name only alerts that alerts.yml defines; and,
// applied to the alerts one standby kill raises (node down, no standby, lag, short lease), they
// leave one page for that pair while the same alerts of another pair still page.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { requireBinary } from "../support/external.js";

const CONFIG = fileURLToPath(
  new URL("../../deploy/alertmanager/alertmanager.yml", import.meta.url),
);
const ALERTS = fileURLToPath(new URL("../../deploy/prometheus/alerts.yml", import.meta.url));
const amtool = requireBinary("amtool", "prometheus-alertmanager");

type Labels = Record<string, string>;
interface InhibitRule {
  source_matchers: string[];
  target_matchers: string[];
  equal: string[];
}

const inhibitRules = () =>
  (parse(readFileSync(CONFIG, "utf8")) as { inhibit_rules: InhibitRule[] }).inhibit_rules;

/** One Alertmanager matcher (`name="v"`, `name=~"re"`, `!=`, `!~`) against an alert's labels. */
function matches(matcher: string, labels: Labels): boolean {
  const m = /^\s*(\w+)\s*(=~|!~|!=|=)\s*"(.*)"\s*$/.exec(matcher);
  if (!m) throw new Error(`matcher not understood: ${matcher}`);
  const [, name, op, value] = m as unknown as [string, string, string, string];
  const v = labels[name] ?? "";
  const re = new RegExp(`^(?:${value})$`);
  if (op === "=") return v === value;
  if (op === "!=") return v !== value;
  return op === "=~" ? re.test(v) : !re.test(v);
}

/** The alerts left after Alertmanager's inhibition (a firing source mutes matching targets). */
function afterInhibition(alerts: Labels[], rules: InhibitRule[]): Labels[] {
  return alerts.filter(
    (target) =>
      !rules.some((r) =>
        alerts.some(
          (source) =>
            source !== target &&
            r.source_matchers.every((m) => matches(m, source)) &&
            r.target_matchers.every((m) => matches(m, target)) &&
            r.equal.every((l) => source[l] === target[l]),
        ),
      ),
  );
}

describe("alertmanager.yml inhibit rules", () => {
  it("name only alerts that alerts.yml defines", () => {
    const defined = new Set(
      (parse(readFileSync(ALERTS, "utf8")) as { groups: { rules: { alert?: string }[] }[] }).groups
        .flatMap((g) => g.rules)
        .flatMap((r) => (r.alert ? [r.alert] : [])),
    );
    const named = inhibitRules()
      .flatMap((r) => [...r.source_matchers, ...r.target_matchers])
      .flatMap((m) => /alertname\s*=~?\s*"(.*)"/.exec(m)?.[1]?.split("|") ?? []);
    expect(named.length).toBeGreaterThan(3);
    for (const name of named) expect(defined, name).toContain(name);
  });

  it("turn one standby kill into one page for its pair, not four", () => {
    const kill = (pair: string): Labels[] => [
      { alertname: "VgpuNodeDown", pair, node: "host-b" },
      { alertname: "VgpuNoStandbyConnected", pair, node: "host-a" },
      { alertname: "VgpuReplicationLagHigh", pair, node: "host-a" },
      { alertname: "VgpuLeaseCloseToExpiry", pair, node: "host-a" },
    ];
    const other = kill("vgpu-two").slice(1); // another pair: its standby is gone, no node down
    const left = afterInhibition([...kill("vgpu-prod"), ...other], inhibitRules());
    expect(left.filter((a) => a.pair === "vgpu-prod").map((a) => a.alertname)).toEqual([
      "VgpuNodeDown",
    ]);
    expect(left.filter((a) => a.pair === "vgpu-two").map((a) => a.alertname)).toEqual([
      "VgpuNoStandbyConnected",
    ]);
  });

  it("keep the pages that a node down does not explain", () => {
    const alerts: Labels[] = [
      { alertname: "VgpuNodeDown", pair: "p", node: "host-a" },
      { alertname: "VgpuFailoverHappened", pair: "p", node: "host-b" },
      { alertname: "VgpuSplitBrainSuspected", pair: "p" },
      { alertname: "VgpuMaintenancePausedTooLong", pair: "p", node: "host-b" },
    ];
    expect(afterInhibition(alerts, inhibitRules())).toEqual(alerts);
  });
});

describe.skipIf(!amtool)("amtool on deploy/alertmanager", () => {
  const run = (...args: string[]) => {
    const r = spawnSync(amtool!, args, { encoding: "utf8", timeout: 60_000 });
    return { code: r.status, out: r.stdout + r.stderr };
  };

  it("check-config: alertmanager.yml is valid", () => {
    const r = run("check-config", CONFIG);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS/);
    expect(r.out).toMatch(/3 inhibit rules/);
  });

  it("routes a critical vgpu alert to the ops receiver", () => {
    const r = run(
      "config",
      "routes",
      "test",
      `--config.file=${CONFIG}`,
      "alertname=VgpuNodeDown",
      "pair=vgpu-prod",
      "severity=critical",
    );
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("vgpu-ops");
  });
});
