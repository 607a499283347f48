/**
 * Datasets: rows for data-dependent environments (JSONL or CSV), and conversations for SFT (JSONL, one
 * `{"messages": [{"role", "content"}, …]}` per line), parsed with errors that name the line.
 */
import type { ChatMessage } from "@/lib/model/chat";
import type { DatasetRow } from "./environment";

export const MAX_DATASET_ROWS = 1_000_000;

export function parseDataset(text: string, format: "jsonl" | "csv", name = "dataset"): DatasetRow[] {
  return format === "jsonl" ? parseJsonl(text, name) : parseCsv(text, name);
}

function parseJsonl(text: string, name: string): DatasetRow[] {
  const rows: DatasetRow[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new Error(`${name}:${i + 1}: not valid JSON (${(error as Error).message}); each line must be one JSON object`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new Error(`${name}:${i + 1}: each line must be a JSON object like {"question": "…"}; got ${Array.isArray(value) ? "an array" : typeof value}`);
    }
    for (const [key, field] of Object.entries(value)) {
      if (field !== null && !["string", "number", "boolean"].includes(typeof field)) {
        throw new Error(`${name}:${i + 1}: field '${key}' must be a string, number, boolean or null; got ${Array.isArray(field) ? "an array" : typeof field}`);
      }
    }
    rows.push(value as DatasetRow);
    if (rows.length > MAX_DATASET_ROWS) throw new Error(`${name}: more than ${MAX_DATASET_ROWS} rows`);
  }
  if (rows.length === 0) throw new Error(`${name}: no rows`);
  return rows;
}

/** RFC 4180 CSV: a header row, quoted fields with "" escapes; numbers stay strings unless they look numeric. */
function parseCsv(text: string, name: string): DatasetRow[] {
  const records: string[][] = [];
  let field = "";
  let record: string[] = [];
  let quoted = false;
  let line = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else {
        if (c === "\n") line++;
        field += c;
      }
    } else if (c === '"' && field === "") quoted = true;
    else if (c === ",") {
      record.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      record.push(field);
      if (record.some((f) => f !== "")) records.push(record);
      record = [];
      field = "";
      line++;
    } else field += c;
  }
  if (quoted) throw new Error(`${name}:${line}: a quoted field is not closed`);
  record.push(field);
  if (record.some((f) => f !== "")) records.push(record);
  const [header, ...body] = records;
  if (!header || body.length === 0) throw new Error(`${name}: a CSV dataset needs a header row and at least one row`);
  return body.map((values, r) => {
    if (values.length !== header.length) {
      throw new Error(`${name}: row ${r + 2} has ${values.length} fields; the header has ${header.length}`);
    }
    return Object.fromEntries(header.map((key, k) => [key, /^-?\d+(\.\d+)?$/.test(values[k]!) ? Number(values[k]) : values[k]!]));
  });
}

const ROLES = new Set(["system", "user", "assistant"]);

/** SFT conversations: each JSONL line `{"messages": [{"role": "system" | "user" | "assistant", "content": "…"}, …]}`. */
export function parseConversations(text: string, name = "dataset"): ChatMessage[][] {
  const conversations: ChatMessage[][] = [];
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const where = `${name}:${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new Error(`${where}: not valid JSON (${(error as Error).message}); each line must be {"messages": [{"role": "user", "content": "…"}, …]}`);
    }
    const messages = (value as { messages?: unknown } | null)?.messages;
    if (!Array.isArray(messages) || messages.length === 0) throw new Error(`${where}: each line must be {"messages": [...]} with at least one message`);
    const checked = messages.map((message: unknown, m) => {
      const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
      if (typeof role !== "string" || !ROLES.has(role))
        throw new Error(`${where}: messages[${m}].role must be system, user or assistant; got ${JSON.stringify(role)}`);
      if (typeof content !== "string") throw new Error(`${where}: messages[${m}].content must be a string`);
      return { role, content } as ChatMessage;
    });
    if (!checked.some((m) => m.role === "assistant")) throw new Error(`${where}: a conversation needs at least one assistant message to imitate`);
    conversations.push(checked);
    if (conversations.length > MAX_DATASET_ROWS) throw new Error(`${name}: more than ${MAX_DATASET_ROWS} conversations`);
  }
  if (conversations.length === 0) throw new Error(`${name}: no conversations`);
  return conversations;
}

/** Whether JSONL text holds SFT conversations (its first line has a messages array) rather than rows. */
export function looksLikeConversations(text: string): boolean {
  const first = text.split("\n").find((line) => line.trim());
  if (!first) return false;
  try {
    return Array.isArray((JSON.parse(first) as { messages?: unknown }).messages);
  } catch {
    return false;
  }
}
