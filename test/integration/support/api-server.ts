import http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { createTRPCClient, httpBatchLink } from "@trpc/client";
import superjson from "superjson";
import { GET, POST } from "@/app/api/trpc/[trpc]/route";
import { admitRequest } from "@/server/api/limits";
import type { AppRouter } from "@/server/api/root";

export type ApiServer = {
  url: string;
  /** Requests that got past the gate to the tRPC route, and the bytes each closed connection read, by its client's port. */
  stats: { routed: number; closed: { port: number; bytesRead: number }[] };
  /** A tRPC client as the browser and workers have (httpBatchLink, superjson). */
  client(headers?: Record<string, string>): ReturnType<typeof createTRPCClient<AppRouter>>;
  close(): Promise<void>;
};

/**
 * The API over real HTTP without a Next.js build: a Node HTTP server with the web server's gate in front of it
 * (server/web-server.ts calls the same `admitRequest` before Next.js), handing each request to the tRPC route's
 * handler as Next.js does. `gate: false` sends requests straight to the route, as when Next.js runs on its own.
 * The route reads the process's database: install the test's with `setDatabase` first.
 */
export async function startApiServer(options: { gate?: boolean } = {}): Promise<ApiServer> {
  const stats = { routed: 0, closed: [] as { port: number; bytesRead: number }[] };
  const serve = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    if (options.gate !== false && !admitRequest(req, res, serve)) return;
    stats.routed++;
    toRoute(req, res).catch((error: unknown) => res.destroy(error as Error));
  };
  const server = http.createServer(serve);
  server.on("connection", (socket) => {
    const port = socket.remotePort!;
    socket.on("close", () => stats.closed.push({ port, bytesRead: socket.bytesRead }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    stats,
    client: (headers = {}) => createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: `${url}/api/trpc`, transformer: superjson, headers })] }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function toRoute(req: http.IncomingMessage, res: http.ServerResponse) {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && name !== "connection" && name !== "host") headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const request = new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: "half" } : {}),
  } as RequestInit);
  const response = await (req.method === "GET" ? GET : POST)(request);
  const body = Buffer.from(await response.arrayBuffer());
  const answered: Record<string, string> = { "content-type": "application/json" };
  for (const [name, value] of response.headers) if (name !== "content-length" && name !== "content-encoding") answered[name] = value;
  res.writeHead(response.status, { ...answered, "content-length": body.length });
  res.end(body);
}
