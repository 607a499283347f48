/** Helpers shared by the datasets page's client components (no server imports). */

/** The largest upload the server accepts (server/datasets MAX_DATASET_BYTES), checked here before reading a file. */
export const MAX_UPLOAD_BYTES = 16 * 1024 * 1024;

/** A dataset name from a file name: its stem, lowercased, with runs of anything but letters and digits as one '-'. */
export function datasetNameFromFile(fileName: string): string {
  const stem = fileName.replace(/\.(jsonl|csv|json|txt)$/i, "");
  return stem
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+/, "")
    .slice(0, 64)
    .replace(/-+$/, "");
}

/** The upload format a file's extension implies: .csv is CSV, anything else JSONL. */
export function formatFromFile(fileName: string): "jsonl" | "csv" {
  return /\.csv$/i.test(fileName) ? "csv" : "jsonl";
}

export function formatBytes(bytes: number): string {
  if (bytes >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

export const count = (n: number) => n.toLocaleString("en-US");
