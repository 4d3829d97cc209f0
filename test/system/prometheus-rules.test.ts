// Proves the project's Prometheus files with Prometheus's own checker: `promtool check config`
// accepts deploy/prometheus/prometheus.yml (and the alerts.yml it loads), `promtool check rules`
// accepts alerts.yml, and `promtool test rules` passes alerts.test.yml, which makes every alert
// fire on its state and stay silent on a healthy pair. Also that the tests cover every alert.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { requireBinary } from "../support/external.js";
import { DEPLOY_PROMETHEUS } from "../support/prometheus.js";

const promtool = requireBinary("promtool", "prometheus");

function run(...args: string[]) {
  const r = spawnSync(promtool!, args, {
    cwd: DEPLOY_PROMETHEUS,
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

const yamlOf = (file: string) => parse(readFileSync(join(DEPLOY_PROMETHEUS, file), "utf8"));

describe("alerts.test.yml", () => {
  it("tests every alert of alerts.yml both firing and silent", () => {
    const alerts = (yamlOf("alerts.yml") as { groups: { rules: { alert?: string }[] }[] }).groups
      .flatMap((g) => g.rules)
      .flatMap((r) => (r.alert ? [r.alert] : []));
    const tests = (
      yamlOf("alerts.test.yml") as {
        tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
      }
    ).tests.flatMap((t) => t.alert_rule_test);
    expect(alerts.length).toBeGreaterThanOrEqual(7);
    for (const alert of alerts) {
      const cases = tests.filter((t) => t.alertname === alert);
      expect(
        cases.some((t) => t.exp_alerts.length > 0),
        `${alert} fires`,
      ).toBe(true);
      expect(
        cases.some((t) => t.exp_alerts.length === 0),
        `${alert} silent`,
      ).toBe(true);
    }
  });
});

describe.skipIf(!promtool)("promtool on deploy/prometheus", () => {
  it("check config: prometheus.yml and the rules it loads are valid", () => {
    const r = run("check", "config", "prometheus.yml");
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("SUCCESS: 1 rule files found");
  });

  it("check rules: alerts.yml is valid", () => {
    const r = run("check", "rules", "alerts.yml");
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it("test rules: every case of alerts.test.yml passes", () => {
    const r = run("test", "rules", "alerts.test.yml");
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("SUCCESS");
    expect(r.out).not.toContain("FAILED");
  });
});
