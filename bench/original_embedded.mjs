// The original's embedded runtime, for bench/run.py: run+halt+resume cycles of one pipeline in
// one Node process through the package's `core` export (runToolRequest to the approval, then
// resumeToolRequest approved), with the state dir given, timed after WARM_UP seconds of the same
// cycles untimed (0 if not given). Prints {"cycles", "seconds"}.
//
//   node bench/original_embedded.mjs PACKAGE_DIR PIPELINE SECONDS STATE_DIR CWD [WARM_UP]
import { pathToFileURL } from "node:url";

const [, , pkg, pipeline, seconds, stateDir, cwd, warmUp = "0"] = process.argv;
const core = await import(pathToFileURL(`${pkg}/dist/src/core/index.js`).href);
const ctx = { env: { LOBSTER_STATE_DIR: stateDir }, cwd };
async function cycle() {
  const halted = await core.runToolRequest({ pipeline, ctx });
  const token = halted.requiresApproval?.resumeToken;
  if (!token) throw new Error(`no approval: ${JSON.stringify(halted)}`);
  const done = await core.resumeToolRequest({ token, approved: true, ctx });
  if (done.status !== "ok") throw new Error(`resume: ${JSON.stringify(done)}`);
}
const warmEnd = performance.now() + Number(warmUp) * 1000;
while (performance.now() < warmEnd) await cycle();
let cycles = 0;
const start = performance.now();
const end = start + Number(seconds) * 1000;
while (performance.now() < end) {
  await cycle();
  cycles += 1;
}
console.log(JSON.stringify({ cycles, seconds: (performance.now() - start) / 1000 }));
