// Runs exported ONNX models under ONNX Runtime (onnxruntime-node, CPU) and
// compares them with the outputs tapegrad computed.
//
//   node tests/onnx/run.mjs DIR
//     For every DIR/<name>.json: {"input_shape", "output_shape", "rtol",
//     "atol"} with DIR/<name>.onnx, DIR/<name>.in.f32 and DIR/<name>.out.f32
//     (raw little-endian f32; with "input_type" "int64" or "int32" the input
//     is DIR/<name>.in.i64 or .in.i32, indices): runs the model on it and requires
//     max |ort - tapegrad| <= atol + rtol * max |tapegrad|.  An optional
//     "level" is ONNX Runtime's graphOptimizationLevel (default "all";
//     "basic" runs QDQ nodes as written, without fusing them into int8 ops).
//     With "inputs" (a list of {"name", "shape", "type", "file"}, type
//     "float32", "uint8", "int64" or "int32") the model takes several
//     inputs, each read from DIR/<file>.  With "extra_outputs" (a list of
//     {"name", "shape", "file"}, raw f32) the model has those outputs after
//     its first, and no others, each compared as the first (an int64 output,
//     indices, by its values).
//   node tests/onnx/run.mjs --same A.onnx B.onnx IN.f32 D0,D1,... [tol]
//     Runs both models on the same input and requires the same number of
//     outputs, each the same as the other's in its place within tol
//     (default 1e-5) relative to its largest magnitude.
// Prints one line per model; exit status 1 if any differs.
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error(`onnxruntime-node is not installed (${e.message.split('\n')[0]}): run ` +
                '`make onnx-runtime` (npm ci --ignore-scripts in tests/onnx)');
  process.exit(1);
}

function f32(path) {
  const b = readFileSync(path);
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

// The input of a case: f32 values or, with input_type, int64 / int32 indices.
function input(dir, name, type) {
  if (!type) return f32(join(dir, name + '.in.f32'));
  const b = readFileSync(join(dir, name + (type === 'int64' ? '.in.i64' : '.in.i32')));
  const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  return type === 'int64' ? new BigInt64Array(ab) : new Int32Array(ab);
}

async function run(model, input, shape, level = 'all', type = 'float32') {
  const s = await ort.InferenceSession.create(model, { graphOptimizationLevel: level });
  const out = await s.run({ [s.inputNames[0]]: new ort.Tensor(type, input, shape) });
  return [out[s.outputNames[0]], out, s.outputNames];
}

// max |a - b| and max |b| over the non-NaN b; a NaN in both is equal, a
// NaN in one only an infinite difference
function diff(a, b) {
  let d = 0, m = 0;
  for (let i = 0; i < b.length; i++) {
    if (Number.isNaN(a[i]) || Number.isNaN(b[i])) {
      if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) d = Infinity;
      continue;
    }
    d = Math.max(d, Math.abs(a[i] - b[i]));
    m = Math.max(m, Math.abs(b[i]));
  }
  return [d, m];
}

const ARRAYS = { float32: Float32Array, uint8: Uint8Array, int64: BigInt64Array,
                 int32: Int32Array };

// The several inputs of a case, by name.
function feeds(dir, inputs) {
  const f = {};
  for (const i of inputs) {
    const b = readFileSync(join(dir, i.file));
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    f[i.name] = new ort.Tensor(i.type, new ARRAYS[i.type](ab), i.shape);
  }
  return f;
}

async function runN(model, inputs, dir, level = 'all') {
  const s = await ort.InferenceSession.create(model, { graphOptimizationLevel: level });
  const out = await s.run(feeds(dir, inputs));
  return [out[s.outputNames[0]], out, s.outputNames];
}

async function cases(dir) {
  let bad = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  if (files.length === 0) {
    console.log(`no cases (.json files) in ${dir}`);
    return 1;
  }
  for (const f of files) {
    const name = f.slice(0, -5);
    const c = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    const want = f32(join(dir, name + '.out.f32'));
    let line;
    try {
      const [y, all, names] = c.inputs
        ? await runN(join(dir, name + '.onnx'), c.inputs, dir, c.level ?? 'all')
        : await run(join(dir, name + '.onnx'), input(dir, name, c.input_type),
                    c.input_shape, c.level ?? 'all', c.input_type ?? 'float32');
      const [d, m] = diff(y.data, want);
      const ok = y.dims.join(',') === c.output_shape.join(',') && y.data.length === want.length &&
                 d <= c.atol + c.rtol * m;
      line = `${ok ? 'ok  ' : 'FAIL'} ${name}: max|diff| ${d.toExponential(3)}, ` +
             `max|y| ${m.toExponential(3)}, dims ${y.dims}, optimization ${c.level ?? 'all'}`;
      if (!ok) bad++;
      const extra = c.extra_outputs ?? [];
      if (names.length !== 1 + extra.length) {
        line += `\nFAIL ${name}: outputs ${names}, expected ${1 + extra.length}`;
        bad++;
      }
      for (const e of extra) {
        const ye = all[e.name], we = f32(join(dir, e.file));
        if (!ye) {
          line += `\nFAIL ${name}: no output ${e.name}`;
          bad++;
          continue;
        }
        // i64 outputs (a MaxPool's indices) as numbers, exact below 2^24
        const yd = ye.data instanceof BigInt64Array ? Float64Array.from(ye.data, Number)
                                                    : ye.data;
        const [de, me] = diff(yd, we);
        const oke = ye.dims.join(',') === e.shape.join(',') && ye.data.length === we.length &&
                    de <= c.atol + c.rtol * me;
        line += `\n${oke ? 'ok  ' : 'FAIL'} ${name} ${e.name}: max|diff| ` +
                `${de.toExponential(3)}, max|y| ${me.toExponential(3)}, dims ${ye.dims}`;
        if (!oke) bad++;
      }
    } catch (e) {
      line = `FAIL ${name}: ${e.message}`;
      bad++;
    }
    console.log(line);
  }
  return bad;
}

async function same(a, b, inPath, dims, tol) {
  const x = f32(inPath), shape = dims.split(',').map(Number);
  const [, oa, na] = await run(a, x, shape), [, ob, nb] = await run(b, x, shape);
  let bad = na.length === nb.length ? 0 : 1;
  if (bad) console.log(`FAIL ${a} has ${na.length} outputs, ${b} ${nb.length}`);
  for (let i = 0; i < Math.min(na.length, nb.length); i++) {
    const ya = oa[na[i]], yb = ob[nb[i]];
    const [d, m] = diff(ya.data, yb.data);
    const ok = ya.dims.join(',') === yb.dims.join(',') && d <= tol * Math.max(m, 1e-30);
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${a} vs ${b} output ${i}: max|diff| ` +
                `${d.toExponential(3)}, max|y| ${m.toExponential(3)}, dims ${ya.dims}`);
    if (!ok) bad++;
  }
  return bad;
}

const args = process.argv.slice(2);
const bad = args[0] === '--same'
  ? await same(args[1], args[2], args[3], args[4], Number(args[5] ?? 1e-5))
  : await cases(args[0]);
process.exit(bad ? 1 : 0);
