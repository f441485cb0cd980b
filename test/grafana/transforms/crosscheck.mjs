#!/usr/bin/env node
// crosscheck.mjs: compares check.mjs's own Prometheus table conversion (toTable) with the real one,
// transformDFToTable and transformV2 from @grafana/prometheus, on every panel of an input file.
// Not needed to run check.mjs; run it after changing toTable or the pinned Grafana version.
//
//   npm install --prefix /tmp/gp --no-save --no-audit --no-fund @grafana/prometheus@11.6.0   # ~1.1 GB
//   node crosscheck.mjs /tmp/gp testdata/sample.json
//
// Exit status: 0 same frames everywhere, 1 a difference (printed), 2 usage.
import { existsSync, readFileSync } from 'node:fs';
import { register } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import { backendFrames, toTable } from './check.mjs'; // also sets up `window`

const [prefix, inputPath] = process.argv.slice(2);
const pkgDir = prefix && join(resolve(prefix), 'node_modules', '@grafana', 'prometheus');
if (!inputPath || !existsSync(join(pkgDir, 'package.json'))) {
  console.error('usage: node crosscheck.mjs <npm prefix holding @grafana/prometheus> input.json');
  process.exit(2);
}
register('./crosscheck-hooks.mjs', import.meta.url, { data: { packageJson: join(pkgDir, 'package.json') } });
const real = await import(pathToFileURL(join(pkgDir, 'dist', 'esm', 'result_transformer.mjs')).href);
const version = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version;

// Plain data to compare: drops the display processor (a function); non-finite numbers as strings.
const plain = (frames) =>
  JSON.stringify(
    frames.map((f) => ({
      refId: f.refId,
      name: f.name,
      length: f.length,
      meta: f.meta,
      fields: f.fields.map((x) => ({
        name: x.name,
        type: x.type,
        config: x.config,
        labels: x.labels,
        values: Array.from(x.values, (v) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v)),
      })),
    }))
  );

let diffs = 0;
const { panels } = JSON.parse(readFileSync(inputPath, 'utf8'));
for (const [i, p] of panels.entries()) {
  const where = p.where || `panels[${i}]`;
  const mine = plain(toTable(backendFrames(p.results, where)));
  const viaTable = plain(real.transformDFToTable(backendFrames(p.results, where)));
  const request = { targets: p.results.map((r) => ({ refId: r.refId, format: 'table', instant: true })) };
  const viaV2 = plain(real.transformV2({ data: backendFrames(p.results, where) }, request, {}).data);
  if (mine === viaTable && mine === viaV2) {
    console.log(`same ${where}`);
  } else {
    diffs++;
    console.log(`DIFF ${where}\n  check.mjs:          ${mine}\n  transformDFToTable: ${viaTable}\n  transformV2:        ${viaV2}`);
  }
}
console.log(`@grafana/prometheus ${version}: ${panels.length - diffs} of ${panels.length} panels give the same table frames`);
process.exitCode = diffs ? 1 : 0;
