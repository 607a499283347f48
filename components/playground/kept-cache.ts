/**
 * The key/value cache as the playground's worker keeps it on WASM: each step the model hands back only the new keys
 * and values (new_key_values.{i}.*, lib/onnx/names.ts), and they are appended here to the previous step's cache.
 */

/**
 * A cache entry [1, nHeads, past, headDim] with `seq` new rows appended, given as [1, seq, nHeads·headDim] (head h in
 * columns h·headDim …): [1, nHeads, past + seq, headDim], what the model's present.{i}.* would be.
 */
export function appendRows(before: Float32Array, past: number, rows: Float32Array, seq: number, nHeads: number, headDim: number): Float32Array {
  const total = past + seq;
  if (before.length !== nHeads * past * headDim)
    throw new Error(`the cache has ${before.length} values, [1, ${nHeads}, ${past}, ${headDim}] needs ${nHeads * past * headDim}`);
  if (rows.length !== seq * nHeads * headDim) throw new Error(`${rows.length} new values, [1, ${seq}, ${nHeads * headDim}] needs ${seq * nHeads * headDim}`);
  const after = new Float32Array(nHeads * total * headDim);
  for (let h = 0; h < nHeads; h++) {
    after.set(before.subarray(h * past * headDim, (h + 1) * past * headDim), h * total * headDim);
    for (let s = 0; s < seq; s++) after.set(rows.subarray((s * nHeads + h) * headDim, (s * nHeads + h + 1) * headDim), (h * total + past + s) * headDim);
  }
  return after;
}
