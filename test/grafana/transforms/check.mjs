#!/usr/bin/env node
// check.mjs: what would a Grafana 11 panel receive from these Prometheus results?
//
//   node check.mjs [--json] input.json
//
// For each panel of the input (format in README.md), this script
//   1. turns each query's instant-vector result into the frames Grafana's Prometheus backend sends
//      (one frame per series: Time, and Value carrying the series labels; an empty frame for a query
//      with no series), then into the table the Prometheus data source makes of format "table"
//      queries (see toTable below);
//   2. runs the panel's transformations through @grafana/data's own transformDataFrame, with the
//      standard transformers registered, as Grafana's panel query runner does;
//   3. checks the resulting frames (trend x field, barchart xField, byName overrides, fillBelowTo)
//      and prints one line per panel.
// Exit status: 0 all checks passed, 1 a check failed, 2 bad input or usage.
//
// The table step (toTable) is this file's own code, not @grafana/prometheus's: that package pulls in
// @grafana/ui, @grafana/runtime, Monaco and more (about 1.1 GB, a minute of npm ci), and its Node
// build loads all of them. toTable follows the rule of its transformDFToTable (Grafana 11.6.0): one
// frame per refId, in query order; fields Time, then one string field per label name (names in
// order of first appearance, each series' names sorted; "" where a series lacks the label), then
// the value field, named "Value" when the response holds frames of a single refId and
// "Value #<refId>" when it holds several (a query with no series still counts: the backend sends
// an empty frame for it); rows in series order, sorted by time when times go backwards; a lone
// empty frame passes through unchanged. crosscheck.mjs compares it with the real transformDFToTable
// and transformV2 of @grafana/prometheus 11.6.0: same frames on testdata/sample.json and on
// testdata/table-cases.json (labels differing between series, __name__, NaN/±Inf, an empty query
// among two, times out of order).
//
// @grafana/data is loaded through require: its ESM build does not load in Node (extension-less
// imports of react-use), the CommonJS build does once `window` exists.

import { readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// @grafana/data reads window.grafanaBootData when it loads, and the transformers look at
// window.__grafanaSceneContext: `window` is the only browser global it needs for this.
globalThis.window ??= globalThis;

const require = createRequire(import.meta.url);
const {
  FieldType,
  FieldMatcherID,
  fieldMatchers,
  getFieldDisplayName,
  getDisplayProcessor,
  isLikelyAscendingVector,
  sortDataFrame,
  standardTransformers,
  standardTransformersRegistry,
  transformDataFrame,
  TIME_SERIES_TIME_FIELD_NAME,
  TIME_SERIES_VALUE_FIELD_NAME,
} = require('@grafana/data');
const GRAFANA_DATA_VERSION = require('@grafana/data/package.json').version;

// Grafana's app registers these same transformer objects (plus some of its own, outside
// @grafana/data) at start-up; transformDataFrame looks them up by id in this registry.
standardTransformersRegistry.setInit(() =>
  [...new Set(Object.values(standardTransformers))].map((t) => ({
    id: t.id,
    aliasIds: t.aliasIds,
    name: t.name,
    description: t.description,
    transformation: t,
  }))
);

class InputError extends Error {}

// ---------------------------------------------------------------------------------------------
// 1. Prometheus instant-vector results -> backend frames -> Prometheus table frames

// Prometheus writes sample values as strings: decimals, "NaN", "+Inf", "-Inf" (Go's ParseFloat
// reads them on the backend).
function parseSample(s, where) {
  if (typeof s !== 'string') {
    throw new InputError(`${where}: sample value ${JSON.stringify(s)} is not a string`);
  }
  const t = s.trim();
  if (/^[+-]?inf(inity)?$/i.test(t)) {
    return t.startsWith('-') ? -Infinity : Infinity;
  }
  if (/^nan$/i.test(t)) {
    return NaN;
  }
  const v = Number(t);
  if (t === '' || Number.isNaN(v)) {
    throw new InputError(`${where}: sample value ${JSON.stringify(s)} is not a number`);
  }
  return v;
}

const backendMeta = () => ({ type: 'numeric-multi', typeVersion: [0, 1], custom: { resultType: 'vector' } });

// backendFrames mirrors what Grafana's Prometheus backend (pkg/promlib) returns for instant
// queries, in query order (the order the frontend reads the response in).
function backendFrames(results, where) {
  if (!Array.isArray(results)) {
    throw new InputError(`${where}: "results" must be an array of {refId, series}`);
  }
  const frames = [];
  for (const [i, r] of results.entries()) {
    const at = `${where}: results[${i}]`;
    if (!r || typeof r.refId !== 'string' || r.refId === '') {
      throw new InputError(`${at}: needs a non-empty string refId`);
    }
    const series = r.series ?? [];
    if (!Array.isArray(series)) {
      throw new InputError(`${at} (refId ${r.refId}): "series" must be an array (data.result of /api/v1/query)`);
    }
    if (series.length === 0) {
      frames.push({ refId: r.refId, name: '', meta: backendMeta(), fields: [], length: 0 });
      continue;
    }
    for (const [j, s] of series.entries()) {
      const sat = `${at} (refId ${r.refId}) series[${j}]`;
      if (!s || typeof s.metric !== 'object' || s.metric === null || !Array.isArray(s.value) || s.value.length !== 2) {
        throw new InputError(`${sat}: want {"metric": {...}, "value": [<unix seconds>, "<value>"]}`);
      }
      const ts = Number(s.value[0]);
      if (!Number.isFinite(ts)) {
        throw new InputError(`${sat}: timestamp ${JSON.stringify(s.value[0])} is not a number`);
      }
      const labels = {};
      for (const [k, v] of Object.entries(s.metric)) {
        labels[k] = String(v);
      }
      frames.push({
        refId: r.refId,
        name: '',
        meta: backendMeta(),
        fields: [
          { name: TIME_SERIES_TIME_FIELD_NAME, type: FieldType.time, config: {}, values: [Math.round(ts * 1000)] },
          {
            name: TIME_SERIES_VALUE_FIELD_NAME,
            type: FieldType.number,
            config: {},
            labels,
            values: [parseSample(s.value[1], sat)],
          },
        ],
        length: 1,
      });
    }
  }
  return frames;
}

// The table conversion passes each (already numeric) value through the data source's
// parseSampleValue, which reads String(v) and tests v[0] for the sign: on a number that is
// undefined, so -Infinity comes out as +Infinity. Kept, since a panel gets it that way.
function parseSampleLikeTable(v) {
  if (/^[+-]?inf(?:inity)?$/i.test(v)) {
    return v[0] === '-' ? -Infinity : Infinity;
  }
  return parseFloat(v);
}

// toTable: the Prometheus data source's table conversion for format "table" (see the top).
function toTable(frames) {
  if (frames.length === 0 || (frames.length === 1 && frames[0].length === 0)) {
    return frames;
  }
  const byRefId = {};
  for (const f of frames) {
    (byRefId[f.refId] ??= []).push(f);
  }
  const refIds = Object.keys(byRefId);
  return refIds.map((refId) => {
    const group = byRefId[refId];
    const timeField = { name: TIME_SERIES_TIME_FIELD_NAME, type: FieldType.time, config: {}, values: [] };
    const valueField = {
      name: refIds.length > 1 ? `${TIME_SERIES_VALUE_FIELD_NAME} #${refId}` : TIME_SERIES_VALUE_FIELD_NAME,
      type: FieldType.number,
      display: getDisplayProcessor(),
      config: { displayNameFromDS: undefined },
      labels: undefined,
      values: [],
    };
    const labelFields = [];
    for (const df of group) {
      for (const name of Object.keys(df.fields[1]?.labels ?? {}).sort()) {
        if (!labelFields.some((l) => l.name === name)) {
          labelFields.push({ name, config: { filterable: true }, type: FieldType.string, values: [] });
        }
      }
    }
    let prevTime = -Infinity;
    let needsSort = false;
    for (const df of group) {
      timeField.config.interval ??= df.fields[0]?.config.interval;
      for (const t of df.fields[0]?.values ?? []) {
        timeField.values.push(t);
        if (t < prevTime) {
          needsSort = true;
        }
        prevTime = t;
      }
      const labels = df.fields[1]?.labels ?? {};
      for (const v of df.fields[1]?.values ?? []) {
        valueField.values.push(parseSampleLikeTable(v));
        for (const lf of labelFields) {
          lf.values.push(Object.prototype.hasOwnProperty.call(labels, lf.name) ? labels[lf.name] : '');
        }
      }
    }
    const frame = {
      refId,
      fields: [timeField, ...labelFields, valueField],
      meta: { ...group[0].meta, preferredVisualisationType: 'rawPrometheus' },
      length: timeField.values.length,
    };
    return needsSort ? sortDataFrame(frame, 0) : frame;
  });
}

// ---------------------------------------------------------------------------------------------
// 2. The panel's transformations, by @grafana/data

function runTransformations(transformations, frames, where) {
  const list = transformations ?? [];
  if (!Array.isArray(list)) {
    throw new InputError(`${where}: "transformations" must be an array`);
  }
  for (const [i, t] of list.entries()) {
    if (!t || typeof t.id !== 'string') {
      throw new InputError(`${where}: transformations[${i}] has no id`);
    }
    if (!t.disabled && !standardTransformersRegistry.getIfExists(t.id)) {
      throw new InputError(
        `${where}: transformations[${i}] "${t.id}" is not one of @grafana/data ${GRAFANA_DATA_VERSION}'s standard ` +
          `transformers (Grafana's app registers a few more of its own), so it cannot be run here`
      );
    }
  }
  return new Promise((resolve, reject) => {
    let last;
    transformDataFrame(list, frames, { interpolate: (s) => s }).subscribe({
      next: (v) => {
        last = v;
      },
      error: reject,
      complete: () => resolve(last ?? []),
    });
  });
}

// ---------------------------------------------------------------------------------------------
// 3. Checks

const displayName = (field, frame, frames) => getFieldDisplayName(field, frame, frames);

// findField mirrors Grafana's findFieldIndex (used by the trend and barchart panels for xField):
// the field's name first, then its display name.
function findField(name, frame, frames) {
  return (
    frame.fields.find((f) => f.name === name) ?? frame.fields.find((f) => displayName(f, frame, frames) === name)
  );
}

function checkPanel(panel, frames, inputHadSeries) {
  const errors = [];
  const type = panel.type;
  const options = panel.options ?? {};
  const withData = frames.filter((f) => f.length > 0 && f.fields.length > 0);

  if (type === 'trend') {
    if (frames.length > 1) {
      // The trend panel's own refusal (Grafana 11: "Only one frame is supported, ...").
      errors.push(
        `trend gets ${frames.length} frames; Grafana's trend panel draws only one ("Only one frame is supported, consider adding a join transformation")`
      );
    }
    if (inputHadSeries && withData.length === 0) {
      errors.push('no frame with data after the transformations, though the queries returned series');
    }
    for (const frame of withData) {
      const fi = frames.indexOf(frame);
      const x = options.xField
        ? findField(options.xField, frame, frames)
        : frame.fields.find((f) => f.type === FieldType.number);
      if (!x) {
        errors.push(
          options.xField
            ? `frame ${fi}: x field "${options.xField}" not found (fields: ${frame.fields.map((f) => f.name).join(', ')})`
            : `frame ${fi}: no number field for the x axis (fields: ${describeFields(frame, frames)})`
        );
        continue;
      }
      if (x.type !== FieldType.number) {
        errors.push(`frame ${fi}: x field "${x.name}" is of type ${x.type}, want number`);
        continue;
      }
      const bad = x.values.findIndex((v) => v == null || Number.isNaN(v));
      if (bad >= 0) {
        errors.push(`frame ${fi}: x field "${x.name}" has ${x.values[bad]} at row ${bad}`);
      } else {
        for (let i = 1; i < x.values.length; i++) {
          if (!(x.values[i] > x.values[i - 1])) {
            errors.push(
              `frame ${fi}: x field "${x.name}" not strictly ascending: ${x.values[i - 1]} then ${x.values[i]} at row ${i} (values ${JSON.stringify(x.values)})`
            );
            break;
          }
        }
        if (!isLikelyAscendingVector(x.values)) {
          errors.push(`frame ${fi}: Grafana's trend panel would say "Values must be in ascending order"`);
        }
      }
      if (!frame.fields.some((f) => f !== x && f.type === FieldType.number)) {
        errors.push(`frame ${fi}: no number field besides x "${x.name}" to draw`);
      }
    }
  }

  if (type === 'barchart') {
    if (inputHadSeries && withData.length === 0) {
      errors.push('no frame with data after the transformations, though the queries returned series');
    }
    if (options.xField && !frames.some((frame) => findField(options.xField, frame, frames))) {
      errors.push(`xField "${options.xField}" is not a field of the result (fields: ${allFieldNames(frames)})`);
    }
  }

  const overrides = panel.fieldConfig?.overrides ?? [];
  for (const [i, o] of overrides.entries()) {
    const matcher = o?.matcher ?? {};
    const label = `override ${i} (${matcher.id} ${JSON.stringify(matcher.options)})`;
    // Grafana's own byName matcher: the field's name or display name.
    const byName = matcher.id === FieldMatcherID.byName && fieldMatchers.get(FieldMatcherID.byName).get(matcher.options);
    if (byName && !frames.some((frame) => frame.fields.some((f) => byName(f, frame, frames)))) {
      errors.push(`${label}: no field named "${matcher.options}" (fields: ${allFieldNames(frames)})`);
    }
    for (const p of o?.properties ?? []) {
      if (p?.id !== 'custom.fillBelowTo' || p.value == null || p.value === '') {
        continue;
      }
      // The time series / trend panels look the target up by name, displayNameFromDS or display name.
      const target = String(p.value);
      const has = frames.some((frame) =>
        frame.fields.some(
          (f) => f.name === target || f.config?.displayNameFromDS === target || displayName(f, frame, frames) === target
        )
      );
      if (!has) {
        errors.push(`${label}: custom.fillBelowTo target "${target}" is not a field (fields: ${allFieldNames(frames)})`);
      }
    }
  }
  return errors;
}

// ---------------------------------------------------------------------------------------------
// Output

// name:type, with the display name when it differs (organize's renameByName sets only that).
function describeFields(frame, frames = [frame]) {
  return frame.fields
    .map((f) => {
      const d = displayName(f, frame, frames);
      return `${f.name}${d === f.name ? '' : ` as ${JSON.stringify(d)}`}:${f.type}`;
    })
    .join(', ');
}

function allFieldNames(frames) {
  const names = [];
  for (const frame of frames) {
    for (const f of frame.fields) {
      const d = displayName(f, frame, frames);
      names.push(d === f.name ? JSON.stringify(f.name) : `${JSON.stringify(f.name)} (shown ${JSON.stringify(d)})`);
    }
  }
  return names.length ? names.join(', ') : 'none';
}

function summary(frames) {
  if (frames.length === 0) {
    return 'no frames';
  }
  return frames
    .map((f, i) => `frame ${i}${f.refId ? ` (refId ${f.refId})` : ''} [${describeFields(f, frames)}] ${f.length} row${f.length === 1 ? '' : 's'}`)
    .join('; ');
}

const jsonValue = (v) => {
  if (typeof v === 'number' && !Number.isFinite(v)) {
    return Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf';
  }
  return v === undefined ? null : v;
};

function framesJSON(frames) {
  return frames.map((frame) => ({
    refId: frame.refId ?? null,
    name: frame.name ?? null,
    length: frame.length,
    fields: frame.fields.map((f) => ({
      name: f.name,
      displayName: displayName(f, frame, frames),
      type: f.type,
      ...(f.labels && Object.keys(f.labels).length ? { labels: f.labels } : {}),
      values: Array.from(f.values, jsonValue),
    })),
  }));
}

async function main(argv) {
  const args = argv.filter((a) => a !== '--json');
  const asJSON = args.length !== argv.length;
  if (args.length !== 1 || args[0].startsWith('-')) {
    console.error('usage: node check.mjs [--json] input.json');
    return 2;
  }
  let input;
  try {
    input = JSON.parse(readFileSync(args[0], 'utf8'));
  } catch (e) {
    console.error(`${args[0]}: ${e.message}`);
    return 2;
  }
  if (!input || !Array.isArray(input.panels)) {
    console.error(`${args[0]}: want {"panels": [...]}`);
    return 2;
  }

  let failed = 0;
  const report = [];
  for (const [i, panel] of input.panels.entries()) {
    const where = typeof panel?.where === 'string' && panel.where ? panel.where : `panels[${i}]`;
    let frames;
    let errors;
    try {
      const backend = backendFrames(panel.results, where);
      const inputHadSeries = backend.some((f) => f.length > 0);
      frames = await runTransformations(panel.transformations, toTable(backend), where);
      errors = checkPanel(panel, frames, inputHadSeries);
    } catch (e) {
      if (e instanceof InputError) {
        console.error(`ERROR ${e.message}`);
        return 2;
      }
      frames = [];
      errors = [`transformations failed: ${e?.stack ?? e}`];
    }
    if (errors.length) {
      failed++;
    }
    if (asJSON) {
      report.push({ where, type: panel.type ?? null, ok: errors.length === 0, errors, frames: framesJSON(frames) });
    } else {
      console.log(`${errors.length ? 'FAIL' : 'ok  '} ${where} (${panel.type ?? 'no type'}): ${summary(frames)}`);
    }
    for (const e of errors) {
      // Text mode keeps each panel's errors under its line on stdout; --json keeps stdout pure JSON.
      (asJSON ? console.error : console.log)(`  ERROR ${where}: ${e}`);
    }
  }
  if (asJSON) {
    console.log(JSON.stringify({ grafanaData: GRAFANA_DATA_VERSION, panels: report }, null, 2));
  } else {
    console.log(
      `checked ${input.panels.length} panels with @grafana/data ${GRAFANA_DATA_VERSION}: ${input.panels.length - failed} ok, ${failed} failing`
    );
  }
  return failed ? 1 : 0;
}

export { backendFrames, toTable, runTransformations, checkPanel, framesJSON };

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
