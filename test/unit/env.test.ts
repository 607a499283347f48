import { describe, expect, it } from "vitest";
import { ConfigError, parseServerEnv } from "@/server/env";

describe("configuration", () => {
  it("uses the embedded database on port 3000 when nothing is set", () => {
    const env = parseServerEnv({});
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env).toMatchObject({ PGLITE_DATA_DIR: "./.data/db", PORT: 3000, HOST: "127.0.0.1", TINKERLAB_BACKEND: "auto" });
  });

  it("treats an empty DATABASE_URL as unset", () => {
    expect(parseServerEnv({ DATABASE_URL: "" }).DATABASE_URL).toBeUndefined();
  });

  it("accepts postgres:// and postgresql:// URLs", () => {
    expect(parseServerEnv({ DATABASE_URL: "postgresql://u:p@db.example:6543/tl" }).DATABASE_URL).toBe("postgresql://u:p@db.example:6543/tl");
  });

  it("names every bad variable, what it held and what is accepted", () => {
    let error: unknown;
    try {
      parseServerEnv({ DATABASE_URL: "mysql://localhost/db", PORT: "70000", TINKERLAB_BACKEND: "tpu" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain('DATABASE_URL="mysql://localhost/db": must be a URL like postgres://user:password@host:5432/dbname');
    expect(message).toContain('PORT="70000": must be a whole number between 1 and 65535');
    expect(message).toMatch(/TINKERLAB_BACKEND="tpu": .*auto.*node-gpu.*wasm.*cpu/);
  });

  it("rejects a port that is not a number", () => {
    expect(() => parseServerEnv({ PORT: "http" })).toThrow(/PORT="http": must be a whole number/);
  });
});
