import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, startExpectingFailure, startServer, tempDir, type TestServer } from "./support/server";

const running: TestServer[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop()));
});

describe("start-up refuses bad configuration with one clear message", () => {
  it("a malformed DATABASE_URL", async () => {
    const { code, output } = await startExpectingFailure({ DATABASE_URL: "localhost:5432/tinkerlab", PORT: String(await freePort()) });
    expect(code).toBe(1);
    expect(output).toContain('DATABASE_URL="localhost:5432/tinkerlab": must be a URL like postgres://user:password@host:5432/dbname');
  });

  it("an unreachable database", async () => {
    const closedPort = await freePort();
    const { code, output } = await startExpectingFailure({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${closedPort}/tinkerlab`,
      PORT: String(await freePort()),
    });
    expect(code).toBe(1);
    expect(output).toContain(`Cannot reach the PostgreSQL server at 127.0.0.1:${closedPort}/tinkerlab`);
    expect(output).toContain("unset DATABASE_URL to use the embedded database");
  });

  it("an unwritable data folder", async () => {
    const file = path.join(tempDir("file"), "not-a-folder");
    fs.writeFileSync(file, "");
    const { code, output } = await startExpectingFailure({ PGLITE_DATA_DIR: path.join(file, "db"), PORT: String(await freePort()) });
    expect(code).toBe(1);
    expect(output).toContain(`The data folder ${path.join(file, "db")} is not writable`);
    expect(output).toContain("Set PGLITE_DATA_DIR to a folder this user can write");
  });

  it("a port in use", async () => {
    const blocker = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, "127.0.0.1", resolve));
    try {
      const { code, output } = await startExpectingFailure({ PORT: String(port), PGLITE_DATA_DIR: path.join(tempDir("db"), "db") });
      expect(code).toBe(1);
      expect(output).toContain(`Port ${port} on 127.0.0.1 is already in use`);
      expect(output).toContain(`set PORT to a free port (e.g. PORT=${port + 1})`);
    } finally {
      blocker.close();
    }
  });

  it("a second server on the same embedded database folder, which stays intact", async () => {
    const first = await startServer({ TINKERLAB_LOCAL_WORKERS: "0" });
    running.push(first);
    const created = await fetch(`${first.url}/api/trpc/experiments.create`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ json: { name: "survives" } }),
    });
    expect(created.status).toBe(200);

    const { code, output } = await startExpectingFailure({ PGLITE_DATA_DIR: first.dataDir, PORT: String(await freePort()) });
    expect(code).toBe(1);
    expect(output).toContain(`The embedded database in ${first.dataDir} is already in use by another Tinkerlab server (process `);
    expect(output).toMatch(/\(process \d+ on .+, since \d{4}-/);

    const list = await fetch(`${first.url}/api/trpc/experiments.list`);
    expect(JSON.stringify(await list.json())).toContain("survives");

    // Once the first server stops, the folder opens again with its data.
    await first.stop();
    const second = await startServer({ PGLITE_DATA_DIR: first.dataDir, TINKERLAB_LOCAL_WORKERS: "0" });
    running.push(second);
    const again = await fetch(`${second.url}/api/trpc/experiments.list`);
    expect(JSON.stringify(await again.json())).toContain("survives");
    // Three servers start one after the other: a minute is not enough on a busy machine (load 16 on 2 cores).
  }, 180_000);
});
