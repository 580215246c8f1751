// Module resolution hooks of the reference driver (node_driver.mjs): a module of the original's
// package imported by a module of generation N (its URL ends in `?gen=N`) is generation N too, so
// each run evaluates the package's own modules afresh, with none of an earlier run's module state.
// Modules outside the package (Node's own, the package's dependencies) are shared as they are.

let packageRoot = null;

export async function initialize(data) {
  packageRoot = data.packageRoot;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  const parent = context.parentURL;
  const mark = parent ? parent.indexOf("?gen=") : -1;
  if (mark < 0 || !resolved.url.startsWith(packageRoot)) return resolved;
  return { ...resolved, url: resolved.url.split("?")[0] + parent.slice(mark) };
}
