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
  poweredByHeader: false,
};

export default config;
