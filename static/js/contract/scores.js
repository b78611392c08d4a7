// Class scores as the pages rank them: softmax for logits, top-k by value descending with
// equal values by index. Pure functions, no DOM and no TF.js; modelcontract/scores.py is the
// Python twin the API ranks with.

// Indices of the k largest values; equal values keep index order (stable, no indexOf).
export function topK(values, k) {
  const order = Array.from(values, (_, i) => i);
  order.sort((a, b) => (values[b] - values[a]) || (a - b));
  return order.slice(0, k);
}

// Softmax of a plain array (max subtracted first, in doubles).
export function softmax(logits) {
  const max = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((v) => v / sum);
}
