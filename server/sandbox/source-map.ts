/**
 * Maps a position in the sandbox bundle back to the user's file, line and column, from the version-3 source map
 * esbuild writes. Only what a lookup needs: the base64 VLQ "mappings" decoded into per-line segments.
 */

type Segment = { generatedColumn: number; source: number; line: number; column: number };

export type RawSourceMap = { version: number; sources: string[]; mappings: string };

export type OriginalPosition = { source: string; line: number; column: number };

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_VALUE = new Map([...BASE64].map((char, index) => [char, index]));

export class SourceMapIndex {
  private readonly lines: Segment[][];

  constructor(
    map: RawSourceMap,
    /** Turns a name from `sources` into the name the user sees; null hides frames from that source. */
    private readonly sourceName: (source: string) => string | null = (source) => source,
  ) {
    if (map.version !== 3) throw new Error(`source map version must be 3; got ${String(map.version)}`);
    this.sources = map.sources;
    this.lines = decodeMappings(map.mappings);
  }

  private readonly sources: string[];

  /** line is 1-based and column 1-based (as QuickJS reports them); the answer is 1-based too. */
  lookup(line: number, column: number): OriginalPosition | null {
    const segments = this.lines[line - 1];
    if (!segments || segments.length === 0) return null;
    const target = column - 1;
    // The segment that starts at or before the column; before the first segment, the line's first segment.
    let lo = 0;
    let hi = segments.length - 1;
    let found = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (segments[mid]!.generatedColumn <= target) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const segment = segments[found]!;
    const source = this.sourceName(this.sources[segment.source] ?? "");
    if (source === null) return null;
    return { source, line: segment.line + 1, column: segment.column + 1 };
  }
}

function decodeMappings(mappings: string): Segment[][] {
  const lines: Segment[][] = [];
  let source = 0;
  let line = 0;
  let column = 0;
  for (const encodedLine of mappings.split(";")) {
    const segments: Segment[] = [];
    let generatedColumn = 0;
    if (encodedLine) {
      for (const encoded of encodedLine.split(",")) {
        const fields = decodeVlq(encoded);
        generatedColumn += fields[0]!;
        if (fields.length >= 4) {
          source += fields[1]!;
          line += fields[2]!;
          column += fields[3]!;
          segments.push({ generatedColumn, source, line, column });
        }
      }
    }
    lines.push(segments);
  }
  return lines;
}

function decodeVlq(encoded: string): number[] {
  const values: number[] = [];
  let value = 0;
  let shift = 0;
  for (const char of encoded) {
    const digit = BASE64_VALUE.get(char);
    if (digit === undefined) throw new Error(`source map: '${char}' is not a base64 digit`);
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
    } else {
      values.push(value & 1 ? -(value >>> 1) : value >>> 1);
      value = 0;
      shift = 0;
    }
  }
  return values;
}
