// The answer check's inputs in TF.js: the check pattern (contract/geometry.js checkPattern)
// as a model's or a model part's input tensor (= modelcontract/answers.py model_input,
// part_input). The judging is contract/answers.js's.
import {checkPattern} from '../contract/geometry.js';
import {prepareInput} from './geometry.js';

const tf = globalThis.tf;

function patternTensor(height, width) {
  return tf.tensor3d(Int32Array.from(checkPattern(height, width)), [height, width, 3], 'int32');
}

// The pattern through a one-graph model's input contract -> [1,H,W,3] (the caller disposes it).
export function modelInput(spec) {
  const [, height, width] = spec.shape;
  const pixels = patternTensor(height, width);
  try {
    return prepareInput(pixels, spec).input;
  } finally {
    pixels.dispose();
  }
}

// The pattern at a part's input size, only scaled (hand pose: answers.py part_input).
export function partInput(spec) {
  const [, height, width] = spec.shape;
  return tf.tidy(() => patternTensor(height, width).toFloat().mul(spec.scale ?? 1).expandDims(0));
}

