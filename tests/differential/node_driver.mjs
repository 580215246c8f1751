// Runs the original's CLI once per request in one long-lived Node process (see node_driver.py).
//
// A fresh `node bin/lobster.js` spends most of its CPU loading Node and compiling the modules of
// the original's dependencies; the run itself is small. This driver pays that once. Each request
// is one CLI run with its own argv, environment, working directory, standard streams and exit
// code, and a fresh generation of the original's own modules (node_hooks.mjs), so no module state
// of an earlier run is seen. A run is answered only when it ends as a real process would end: its
// script has settled and every handle it opened is closed again (the event loop would be empty).
//
// What a fresh process would do differently cannot be repaired here, so it is reported instead
// (`unfaithful`), and the caller runs the case again in fresh processes: an uncaught exception or
// rejection, a process warning, process.exit, a listener on the process left behind, output that
// went around process.stdout/stderr, or an environment that Node reads only as it starts.
//
// Usage: node node_driver.mjs BIN FD (BIN: the original's bin script; FD: a socket). Requests and
// answers are JSON lines on FD: {argv, env, cwd} -> {code, stdout, stderr (base64), unfaithful}.

import { ChildProcess } from "node:child_process";
import fs from "node:fs";
import { register } from "node:module";
import net from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [binPath, channelFd] = process.argv.slice(2);
const binFile = fs.realpathSync(binPath);
const packageRoot = `${pathToFileURL(path.dirname(path.dirname(binFile)))}/`;
register(new URL("./node_hooks.mjs", import.meta.url), { data: { packageRoot } });

// Read by Node only as it starts (options, locale, libuv, OpenSSL): a run that sets any of them
// differently from the driver's own start is not one the driver can stand in for.
const STARTUP = /^(NODE_|UV_|OPENSSL_|SSL_CERT_|LC_|LANG$|LANGUAGE$)/;
const startupEnv = JSON.stringify(startupPart(process.env));
const WATCHED = ["exit", "beforeExit", "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE",
  "warning", "message", "disconnect", "multipleResolves", "worker"];
const UNDICI = Symbol.for("undici.globalDispatcher.1");
const stdinDescriptor = Object.getOwnPropertyDescriptor(process, "stdin");
let generation = 0;
let current = null; // the run in progress: {out, err, problems}
let leftover = null; // what surfaced between runs: the next run is refused

function startupPart(env) {
  return Object.fromEntries(Object.entries(env).filter(([k]) => STARTUP.test(k)).sort());
}

function flag(problem) {
  if (current) current.problems.push(problem);
  else leftover ??= `after a run: ${problem}`;
}

function capture(stream, key) {
  stream.write = (chunk, encoding, callback) => {
    if (typeof encoding === "function") [callback, encoding] = [encoding, undefined];
    const bytes = typeof chunk === "string" ? Buffer.from(chunk, encoding || "utf8")
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (current) current[key].push(Buffer.from(bytes));
    else flag(`${key} written between runs`);
    if (callback) process.nextTick(callback);
    return true;
  };
}

capture(process.stdout, "out");
capture(process.stderr, "err");
process.on("uncaughtException", (error) => flag(`uncaught exception: ${error?.message}`));
process.on("unhandledRejection", (error) => flag(`unhandled rejection: ${error?.message}`));
process.on("warning", (warning) => flag(`process warning: ${warning?.message}`));
process.exit = (code) => {
  flag(`process.exit(${code})`);
  throw new Error("process.exit in a driven run");
};

// A timer a run unreferenced never fires in a real process that has nothing else left to do:
// at the end of the run it is cleared. A socket it unreferenced (HTTP keep-alive) must be closed
// once the run's HTTP connections are (see runOne); an unreferenced child would outlive the run.
const unreferenced = { timers: new Set(), sockets: new Set() };
const { prototype: timeout } = setTimeout(() => {}, 0).constructor;
const unrefTimer = timeout.unref;
timeout.unref = function unref() {
  if (current) unreferenced.timers.add(this);
  return unrefTimer.call(this);
};
const unrefSocket = net.Socket.prototype.unref;
net.Socket.prototype.unref = function unref() {
  if (current) unreferenced.sockets.add(this);
  return unrefSocket.call(this);
};
const unrefChild = ChildProcess.prototype.unref;
ChildProcess.prototype.unref = function unref() {
  flag("an unreferenced child process");
  return unrefChild.call(this);
};

const listenerCounts = () => WATCHED.map((name) => process.listenerCount(name)).join();
const settle = () => new Promise((resolve) => setImmediate(resolve));
const resources = () => process.getActiveResourcesInfo().sort().join();
const outsideSizes = () => [1, 2].map((fd) => fs.fstatSync(fd).size).join();

async function drain(baseline) {
  // A real process lives on until nothing is pending: wait as long (polling, not spinning).
  for (;;) {
    await settle();
    if (resources() === baseline) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function runOne(request) {
  const run = { out: [], err: [], problems: [] };
  if (leftover) {
    run.problems.push(leftover);
    return run;
  }
  if (JSON.stringify(startupPart(request.env)) !== startupEnv) {
    run.problems.push("an environment Node reads as it starts");
    return run;
  }
  await settle();
  const baseline = resources();
  const listeners = listenerCounts();
  const outside = outsideSizes();
  for (const key of Object.keys(process.env)) delete process.env[key];
  Object.assign(process.env, request.env);
  process.chdir(request.cwd);
  process.argv = [process.execPath, binPath, ...request.argv];
  process.exitCode = undefined;
  let stdin = null; // as Node makes it for a /dev/null stdin: a file stream that ends at once
  Object.defineProperty(process, "stdin", {
    configurable: true,
    enumerable: stdinDescriptor.enumerable,
    get() {
      stdin ??= new fs.ReadStream(null, { fd: fs.openSync("/dev/null", "r"), autoClose: false });
      return stdin;
    },
  });
  current = run;
  generation += 1;
  try {
    await import(`${pathToFileURL(binFile)}?gen=${generation}`);
  } catch (error) {
    flag(`the script threw: ${error?.message}`);
  }
  await drain(baseline);
  for (const timer of unreferenced.timers) clearTimeout(timer);
  unreferenced.timers.clear();
  current = null;
  run.code = process.exitCode ?? 0;
  if (stdin) fs.closeSync(stdin.fd);
  Object.defineProperty(process, "stdin", stdinDescriptor);
  const dispatcher = globalThis[UNDICI];
  if (dispatcher) { // HTTP connections kept alive end with the run, as its process would end
    globalThis[UNDICI] = new dispatcher.constructor();
    await dispatcher.destroy();
  }
  for (const socket of unreferenced.sockets) {
    if (!socket.destroyed) run.problems.push("an unreferenced socket still open");
  }
  unreferenced.sockets.clear();
  if (listenerCounts() !== listeners) run.problems.push("a process listener left behind");
  if (outsideSizes() !== outside) run.problems.push("output around process.stdout/stderr");
  return run;
}

const channel = new net.Socket({ fd: Number(channelFd), readable: true, writable: true });
let pending = "";
let queue = Promise.resolve();
channel.setEncoding("utf8");
channel.on("data", (text) => {
  pending += text;
  let end;
  while ((end = pending.indexOf("\n")) >= 0) {
    const request = JSON.parse(pending.slice(0, end));
    pending = pending.slice(end + 1);
    queue = queue.then(async () => {
      const run = await runOne(request);
      const answer = {
        code: run.code ?? null,
        stdout: Buffer.concat(run.out).toString("base64"),
        stderr: Buffer.concat(run.err).toString("base64"),
        unfaithful: run.problems.join("; ") || null,
      };
      channel.write(`${JSON.stringify(answer)}\n`);
    });
  }
});
channel.on("end", () => channel.destroy());
