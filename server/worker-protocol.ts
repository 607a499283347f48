/**
 * What a worker process and the web server both need to know of each other, and nothing that loads either side:
 * the HTTP worker imports this, not the API's routers.
 */

/** The header a worker sends the server's worker token in (TINKERLAB_WORKER_TOKEN). */
export const WORKER_TOKEN_HEADER = "x-tinkerlab-worker-token";
