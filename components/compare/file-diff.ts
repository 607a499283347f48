/** Two versions' source files diffed file by file and line by line (jsdiff's unified hunks, three lines of context). */
import { structuredPatch } from "diff";

export type DiffLine = { kind: "context" | "added" | "removed"; oldLine: number | null; newLine: number | null; text: string };
export type DiffHunk = { oldStart: number; newStart: number; lines: DiffLine[] };
export type FileDiff = { path: string; status: "changed" | "added" | "removed" | "same"; added: number; removed: number; hunks: DiffHunk[] };

/** Every file of either version, by path, with what changed from `base` to `other`. */
export function diffFiles(base: Record<string, string>, other: Record<string, string>): FileDiff[] {
  const paths = [...new Set([...Object.keys(base), ...Object.keys(other)])].sort();
  return paths.map((path) => {
    const before = base[path];
    const after = other[path];
    const status = before === undefined ? "added" : after === undefined ? "removed" : before === after ? "same" : "changed";
    if (status === "same") return { path, status, added: 0, removed: 0, hunks: [] };
    const patch = structuredPatch(path, path, before ?? "", after ?? "", undefined, undefined, { context: 3 });
    let added = 0;
    let removed = 0;
    const hunks = patch.hunks.map((hunk) => {
      let oldLine = hunk.oldStart;
      let newLine = hunk.newStart;
      const lines: DiffLine[] = [];
      for (const line of hunk.lines) {
        const mark = line[0];
        const text = line.slice(1);
        // jsdiff's "\ No newline at end of file" notes are not lines of either file.
        if (mark === "\\") continue;
        if (mark === "+") {
          added++;
          lines.push({ kind: "added", oldLine: null, newLine: newLine++, text });
        } else if (mark === "-") {
          removed++;
          lines.push({ kind: "removed", oldLine: oldLine++, newLine: null, text });
        } else {
          lines.push({ kind: "context", oldLine: oldLine++, newLine: newLine++, text });
        }
      }
      return { oldStart: hunk.oldStart, newStart: hunk.newStart, lines };
    });
    return { path, status, added, removed, hunks };
  });
}
