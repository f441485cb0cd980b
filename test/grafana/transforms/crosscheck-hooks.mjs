// Module resolution hooks for crosscheck.mjs (node:module register). They let the per-file ESM
// build of @grafana/prometheus's result_transformer load in Node without its UI dependencies:
//   @grafana/runtime -> a stub (the transformer needs it only for exemplar links);
//   @grafana/data    -> its CommonJS build (the ESM build does not load in Node);
//   lodash           -> lodash's CommonJS module re-exported under named exports.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

let req;

export async function initialize({ packageJson }) {
  req = createRequire(packageJson);
}

const asModule = (src) => ({ url: `data:text/javascript,${encodeURIComponent(src)}`, shortCircuit: true });

export async function resolve(specifier, context, next) {
  if (specifier === '@grafana/runtime') {
    return asModule(
      'export const getDataSourceSrv = () => { throw new Error("@grafana/runtime is not loaded by crosscheck.mjs"); };'
    );
  }
  if (specifier === '@grafana/data') {
    return { url: pathToFileURL(req.resolve('@grafana/data')).href, shortCircuit: true };
  }
  if (specifier === 'lodash') {
    const path = req.resolve('lodash');
    const names = Object.keys(req(path)).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n));
    return asModule(
      `import { createRequire } from 'node:module';\n` +
        `const m = createRequire(${JSON.stringify(path)})(${JSON.stringify(path)});\n` +
        names.map((n) => `export const ${n} = m.${n};`).join('\n')
    );
  }
  return next(specifier, context);
}
