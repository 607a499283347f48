// Preloaded (NODE_OPTIONS=--require) by `bench:stream --cpu-prof DIR`: Node refuses --cpu-prof in NODE_OPTIONS, so
// this starts the V8 profiler in every process of the server's tree and writes DIR/<pid>.cpuprofile at exit.
const fs = require("node:fs");
const path = require("node:path");
const inspector = require("node:inspector");
const dir = process.env.BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post("Profiler.setSamplingInterval", { interval: 1000 });
  session.post("Profiler.enable");
  session.post("Profiler.start");
  process.on("exit", () => {
    session.post("Profiler.stop", (error, result) => {
      if (error) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(
        path.join(dir, `${process.pid}-${path.basename(process.argv[2] ?? process.argv[1] ?? "node")}.cpuprofile`),
        JSON.stringify(result.profile),
      );
    });
  });
}
