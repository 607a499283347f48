export function sourceHash(root: string): string;
export function buildIfStale(root: string, options?: { log?: (line: string) => void }): boolean;
export function ensureDependencies(root: string, options?: { log?: (line: string) => void }): void;
