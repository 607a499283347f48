import type { NextConfig } from "next";

const config: NextConfig = {
  // Packages with WebAssembly or native parts are loaded by Node at run time rather than bundled.
  serverExternalPackages: [
    "@electric-sql/pglite",
    "pg",
    "@tensorflow/tfjs-core",
    "@tensorflow/tfjs-backend-cpu",
    "@tensorflow/tfjs-backend-wasm",
    "@tensorflow/tfjs-node",
    "@tensorflow/tfjs-node-gpu",
  ],
  devIndicators: false,
  // The playground runs WebAssembly threads, which only a cross-origin-isolated page may start (COOP and COEP). A
  // worker started from such a page must itself be served with COEP: Turbopack starts every worker from its
  // `turbopack-worker-*.js` entry, so that file carries it. onnxruntime-web's files (app/ort) set it themselves.
  async headers() {
    const embedderPolicy = { key: "Cross-Origin-Embedder-Policy", value: "require-corp" };
    return [
      { source: "/playground", headers: [{ key: "Cross-Origin-Opener-Policy", value: "same-origin" }, embedderPolicy] },
      { source: "/_next/static/chunks/:entry(turbopack-worker-.+\\.js)", headers: [embedderPolicy] },
    ];
  },
  poweredByHeader: false,
};

export default config;
