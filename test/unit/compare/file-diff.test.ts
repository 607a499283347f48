/** The source diff: each file of two versions, what was added, removed or changed, line by line with line numbers. */
import { describe, expect, it } from "vitest";
import { diffFiles } from "@/components/compare/file-diff";

const lines = (n: number, changed: Record<number, string> = {}) => `${Array.from({ length: n }, (_, i) => changed[i + 1] ?? `line ${i + 1}`).join("\n")}\n`;

describe("diffFiles", () => {
  it("shows a changed line of environment.ts with its number in both versions and three lines around it", () => {
    const [env] = diffFiles({ "environment.ts": lines(20) }, { "environment.ts": lines(20, { 10: "const target = 12;" }) });
    expect(env).toMatchObject({ path: "environment.ts", status: "changed", added: 1, removed: 1 });
    expect(env!.hunks).toHaveLength(1);
    expect(env!.hunks[0]!.lines).toEqual([
      { kind: "context", oldLine: 7, newLine: 7, text: "line 7" },
      { kind: "context", oldLine: 8, newLine: 8, text: "line 8" },
      { kind: "context", oldLine: 9, newLine: 9, text: "line 9" },
      { kind: "removed", oldLine: 10, newLine: null, text: "line 10" },
      { kind: "added", oldLine: null, newLine: 10, text: "const target = 12;" },
      { kind: "context", oldLine: 11, newLine: 11, text: "line 11" },
      { kind: "context", oldLine: 12, newLine: 12, text: "line 12" },
      { kind: "context", oldLine: 13, newLine: 13, text: "line 13" },
    ]);
  });

  it("lists every file of either version: unchanged, added and removed ones too, by path", () => {
    const diffs = diffFiles({ "a.ts": "x\n", "gone.ts": "old\n" }, { "a.ts": "x\n", "new.ts": "one\ntwo" });
    expect(diffs.map((d) => [d.path, d.status, d.added, d.removed])).toEqual([
      ["a.ts", "same", 0, 0],
      ["gone.ts", "removed", 0, 1],
      ["new.ts", "added", 2, 0],
    ]);
    // A last line without a newline is a line like any other, with no marker of its own.
    expect(diffs[2]!.hunks[0]!.lines.map((l) => l.text)).toEqual(["one", "two"]);
  });
});
