// Resolves the conformance bundle's "fs" to fs-shim.mjs; every other
// module gets node's own.
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL && context.parentURL.includes('/@modelcontextprotocol/conformance/')) {
    return { url: new URL('./fs-shim.mjs', import.meta.url).href, shortCircuit: true };
  }
  return next(specifier, context);
}
