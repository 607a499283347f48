/**
 * A POSIX tar archive (ustar) of plain files, written entry by entry to a file: what an export of a run with several
 * policies downloads (one safetensors per agent), read by `tar -xf` or any unarchiver.
 */
import fs from "node:fs";

const BLOCK = 512;
/** The size field holds 11 octal digits: 8 GiB − 1. */
const MAX_SIZE = 8 ** 11 - 1;

/** Writes `entries` (name → bytes, in order) as a tar archive at `file`; returns its size in bytes. */
export function writeTar(file: string, entries: { name: string; bytes: Uint8Array }[]): number {
  const fd = fs.openSync(file, "w");
  let written = 0;
  const write = (bytes: Uint8Array) => {
    fs.writeSync(fd, bytes);
    written += bytes.length;
  };
  try {
    const mtime = Math.floor(Date.now() / 1000);
    for (const entry of entries) {
      write(header(entry.name, entry.bytes.length, mtime));
      write(entry.bytes);
      const pad = (BLOCK - (entry.bytes.length % BLOCK)) % BLOCK;
      if (pad > 0) write(new Uint8Array(pad));
    }
    write(new Uint8Array(2 * BLOCK)); // the end of the archive: two zero blocks
  } finally {
    fs.closeSync(fd);
  }
  return written;
}

function header(name: string, size: number, mtime: number): Uint8Array {
  const nameBytes = new TextEncoder().encode(name);
  if (nameBytes.length === 0 || nameBytes.length > 100) throw new Error(`a tar entry's name must be 1 to 100 bytes; got '${name}'`);
  if (size > MAX_SIZE) throw new Error(`a tar entry holds at most ${MAX_SIZE} bytes; '${name}' has ${size}`);
  const block = new Uint8Array(BLOCK);
  const put = (at: number, text: string) => block.set(new TextEncoder().encode(text), at);
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, "0")}\0`;
  block.set(nameBytes, 0);
  put(100, octal(0o644, 8)); // mode
  put(108, octal(0, 8)); // uid
  put(116, octal(0, 8)); // gid
  put(124, octal(size, 12));
  put(136, octal(mtime, 12));
  put(148, "        "); // the checksum counts its own field as spaces
  put(156, "0"); // a regular file
  put(257, "ustar\0");
  put(263, "00");
  const sum = block.reduce((a, b) => a + b, 0);
  put(148, `${sum.toString(8).padStart(6, "0")}\0 `);
  return block;
}
