// Module resolve hook registered by globsync-preload.mjs (Node 20 only): sends
// ESM imports of `fs` / `node:fs` to globsync-fs.mjs, which adds the named
// export `globSync`. The shim's own import of node:fs is left alone.
const shim = new URL("./globsync-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL !== shim) {
    return { url: shim, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
