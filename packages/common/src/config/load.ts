// Loads the configuration: a JSON or YAML file, then VGPU_* environment overrides, then the
// schema. An invalid value is a ConfigError naming the field, the value and the rule.
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { type Config, ConfigSchema } from "./schema.js";

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * VGPU_* variables that are not overrides: the config file's path, and vgpuctl's variables
 * under their old names (vgpuctl reads VGPUCTL_NODES and VGPUCTL_TOKEN, and these as aliases),
 * so that an operator's `export VGPU_NODES=…` for vgpuctl never stops vgpud.
 */
export const NOT_OVERRIDES: ReadonlySet<string> = new Set([
  "VGPU_CONFIG",
  "VGPU_NODES",
  "VGPU_TOKEN",
]);

/** The config field (dotted path) each VGPU_* override sets, by variable name. */
export function envFields(env: NodeJS.ProcessEnv): Map<string, string> {
  const fields = new Map<string, string>();
  for (const [name, raw] of Object.entries(env)) {
    if (!name.startsWith("VGPU_") || raw === undefined || NOT_OVERRIDES.has(name)) continue;
    fields.set(name, name.slice(5).split("__").map(camel).join("."));
  }
  return fields;
}

/**
 * VGPU_DEVICE__VRAM_BYTES=1GiB sets device.vramBytes: `__` separates levels, and each level is
 * UPPER_SNAKE for a camelCase key. Values are parsed as JSON when they can be, else strings.
 */
export function envOverrides(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [name, field] of envFields(env)) {
    const raw = env[name]!;
    const path = field.split(".");
    let node = root;
    for (const key of path.slice(0, -1)) {
      if (typeof node[key] !== "object" || node[key] === null) node[key] = {};
      node = node[key] as Record<string, unknown>;
    }
    node[path.at(-1)!] = parseValue(raw);
  }
  return root;
}

const camel = (s: string) =>
  s.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function parseValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function merge(base: unknown, over: unknown): unknown {
  if (typeof base !== "object" || base === null || Array.isArray(base)) return over;
  if (typeof over !== "object" || over === null || Array.isArray(over)) return over;
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over)) out[k] = merge(out[k], v);
  return out;
}

export function readConfigFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ConfigError(`config file ${path}: ${(e as Error).message}`);
  }
  try {
    return path.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new ConfigError(
      `config file ${path}: not valid ${path.endsWith(".json") ? "JSON" : "YAML"}: ${(e as Error).message}`,
    );
  }
}

/**
 * Validates; a ConfigError lists every problem, one line each. `fromEnv` (variable name →
 * field, from envFields) lets an unknown key that came from the environment name its variable.
 */
export function parseConfig(input: unknown, fromEnv: Map<string, string> = new Map()): Config {
  const result = ConfigSchema.safeParse(input ?? {}, { reportInput: true });
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.flatMap((issue) => describeIssueFrom(issue, fromEnv)).join("\n"),
  );
}

/** An unknown key set by VGPU_* variables is reported by the variables' names. */
function describeIssueFrom(issue: z.core.$ZodIssue, fromEnv: Map<string, string>): string[] {
  if (issue.code !== "unrecognized_keys") return [describeIssue(issue)];
  const at = (key: string) => [...issue.path, key].join(".");
  const setting = (key: string) =>
    [...fromEnv].filter(([, f]) => f === at(key) || f.startsWith(`${at(key)}.`)).map(([n]) => n);
  const lines = issue.keys.flatMap((key) =>
    setting(key).map((name) => `config: ${name}: unknown variable (vgpud has no field ${at(key)})`),
  );
  const rest = issue.keys.filter((key) => setting(key).length === 0);
  if (rest.length === 0) return lines;
  const keys = rest.map((k) => JSON.stringify(k)).join(", ");
  const message = `Unrecognized key${rest.length > 1 ? "s" : ""}: ${keys}`;
  return [describeIssue({ ...issue, keys: rest, message }), ...lines];
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length > 0 ? issue.path.join(".") : "(root)";
  return `config: ${field}${describeValue(issue)}: ${issue.message}`;
}

/** The offending value, when it is a plain value and not a secret. */
function describeValue(issue: z.core.$ZodIssue): string {
  if (!("input" in issue)) return "";
  const input = issue.input;
  const last = String(issue.path.at(-1) ?? "");
  if (/token|key|secret|password/i.test(last)) return " = (hidden)";
  const plain =
    input === null || ["string", "number", "boolean", "undefined"].includes(typeof input);
  return plain ? ` = ${JSON.stringify(input)}` : "";
}

/** The config with every secret replaced, for printing. */
export function redactConfig(config: Config): Config {
  return JSON.parse(
    JSON.stringify(config, (key, value) =>
      /token|key|secret|password/i.test(key) && typeof value === "string" ? "(hidden)" : value,
    ),
  ) as Config;
}

/** File (optional) + environment overrides + defaults, validated. */
export function loadConfig(options: { file?: string; env?: NodeJS.ProcessEnv }): Config {
  const fromFile = options.file ? readConfigFile(options.file) : {};
  const env = options.env ?? {};
  return parseConfig(merge(fromFile ?? {}, envOverrides(env)), envFields(env));
}
