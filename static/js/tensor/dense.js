// A dense model's output -> a map of the photo, as Ultralytics' predictors make it (the
// formats, region and summaries: contract/dense.js, the twin of modelcontract/dense.py):
//   "yolo-semantic"  class logits [1, h, w, nc] over the letterboxed input: cropped to the
//                    letterbox's content, resized to the photo (bilinear, half-pixel), argmax
//                    -> a class map (Uint8Array, one class id a pixel)
//   "yolo-depth"     a depth map [1, h, w, 1] over the stretched input: resized to the photo
//                    (bilinear, align_corners, as the depth predictor does) -> Float32Array
// The resize and argmax run on the backend; only the map is read back.
import {contentRegion} from '../contract/dense.js';

const tf = globalThis.tf;

// outputs: the model's one output tensor in an array; frame: {transform, width, height}.
// -> {values, width, height}: values a Uint8Array of class ids or a Float32Array of depths.
export async function decodeDense(manifest, outputs, frame) {
  const {width, height} = frame;
  const semantic = manifest.outputs.format === 'yolo-semantic';
  const map = tf.tidy(() => {
    const out = outputs[0];
    if (!semantic) return tf.image.resizeBilinear(out, [height, width], true).reshape([-1]);
    const {top, left, rows, cols} = contentRegion(frame.transform, width, height);
    const content = out.slice([0, top, left, 0], [1, rows, cols, -1]);
    // argMax takes the lower class on a tie, as numpy's argmax does
    return tf.image.resizeBilinear(content, [height, width], false, true).argMax(-1).reshape([-1]);
  });
  try {
    const data = await map.data();
    return {values: semantic ? Uint8Array.from(data) : data, width, height};
  } finally {
    map.dispose();
  }
}
