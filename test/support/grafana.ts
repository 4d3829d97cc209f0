// Reads deploy/grafana/vgpu-ha.json: every PromQL expression it holds (panel targets, the
// annotation, the template variable), and the metric names they use.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const DASHBOARD_FILE = fileURLToPath(
  new URL("../../deploy/grafana/vgpu-ha.json", import.meta.url),
);

export interface Target {
  readonly refId: string;
  readonly expr: string;
  readonly datasource?: { type: string; uid: string };
}

export interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly datasource?: { type: string; uid: string };
  readonly targets?: Target[];
}

export interface Dashboard {
  readonly __inputs: { name: string; type: string; pluginId: string }[];
  readonly panels: Panel[];
  readonly annotations: { list: { name: string; expr?: string }[] };
  readonly templating: { list: { name: string; query: { query: string } }[] };
  readonly uid: string;
  readonly title: string;
}

export const loadDashboard = (): Dashboard =>
  JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as Dashboard;

/** Every PromQL expression, named by where it is. */
export function dashboardQueries(
  d: Dashboard = loadDashboard(),
): { where: string; expr: string }[] {
  const panels = d.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr })),
  );
  const annotations = d.annotations.list.flatMap((a) =>
    a.expr ? [{ where: `annotation "${a.name}"`, expr: a.expr }] : [],
  );
  const variables = d.templating.list.map((v) => ({
    where: `variable ${v.name}`,
    // label_values(SELECTOR, label) is Grafana's, not PromQL: the selector is the query part
    expr: v.query.query.replace(/^label_values\((.*),\s*\w+\)$/, "$1"),
  }));
  return [...panels, ...annotations, ...variables];
}

/** The metric names an expression names (anything directly followed by a selector or range). */
export function metricNames(expr: string): string[] {
  return [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[)/g)].map((m) => m[1]!);
}

/** The expression as Prometheus can run it outside Grafana: Grafana's variables filled in. */
export const withGrafanaVariables = (expr: string) =>
  expr.replaceAll("$__rate_interval", "1m").replaceAll("$__range", "1m").replaceAll("$pair", ".*");
