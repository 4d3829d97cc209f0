// Proves npm run hostile's command line refuses what it must: a --target that is not loopback
// without --i-own-this-host, --target without exactly one --attack, unknown attacks, half-given
// TLS files; and takes loopback targets, the owner's word, and the defaults.
import { describe, expect, it } from "vitest";
import { allAttacks } from "./catalogue.js";
import { parseOptions, UsageError } from "./options.js";

const parse = (...argv: string[]) => parseOptions(argv);

describe("npm run hostile's options", () => {
  it("runs every attack on its own pair by default", () => {
    const o = parse();
    expect(o).not.toBe("help");
    if (o === "help") return;
    expect(o.attacks).toEqual(allAttacks().map((a) => a.name));
    expect(o.target).toBeUndefined();
    expect(o.scale).toBe("full");
  });

  it("aims one attack at a loopback target", () => {
    const o = parse("--attack", "garbage", "--target", "127.0.0.1:7400");
    expect(o !== "help" && o.target?.target).toBe("127.0.0.1:7400");
  });

  it("refuses a target that is not loopback unless the operator owns the host", () => {
    expect(() => parse("--attack", "garbage", "--target", "10.1.2.3:7400")).toThrow(
      /10\.1\.2\.3 is not loopback.*--i-own-this-host/,
    );
    expect(() =>
      parse("--attack", "garbage", "--target", "127.0.0.1:7400", "--ops", "http://10.1.2.3:9400"),
    ).toThrow(UsageError);
    const o = parse("--attack", "garbage", "--target", "10.1.2.3:7400", "--i-own-this-host");
    expect(o !== "help" && o.target?.target).toBe("10.1.2.3:7400");
  });

  it("refuses --target without exactly one attack, unknown attacks and half-given TLS", () => {
    expect(() => parse("--target", "127.0.0.1:7400")).toThrow(/exactly one --attack/);
    expect(() => parse("--attack", "garbage,slowloris-ops", "--target", "127.0.0.1:1")).toThrow(
      /exactly one --attack/,
    );
    expect(() => parse("--attack", "nuke")).toThrow(/unknown attack "nuke"/);
    expect(() =>
      parse(
        "--attack",
        "hello-other-cluster-tls@primary",
        "--target",
        "127.0.0.1:7500",
        "--tls-ca",
        "ca.crt",
      ),
    ).toThrow(/go together/);
    expect(() => parse("--attack", "garbage", "--target", "no-port")).toThrow(UsageError);
  });
});
