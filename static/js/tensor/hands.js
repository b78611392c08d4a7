// MediaPipe Hands' pipeline in TF.js (@tensorflow-models/hand-pose-detection 2.0.1, runtime
// 'tfjs'): the crops into each model's input, the palm NMS, and HandPipeline, which runs the
// pure steps of contract/hands.js around two model runners it is given (runtime/runtime.js
// modelRunner: a TF.js graph or the same .tflite files the server runs, on LiteRT.js).
import {decodeDetections, landmarksToRect, padRoi, palmToRoi, projectLandmarks, projectWorldLandmarks,
        projectiveTransform, removeDetectionLetterbox, roiOf, splitDetections, transformRect,
        associateRects} from '../contract/hands.js';
import {ssdAnchors} from '../contract/anchors.js';
import TWINS from '../contract/twins.json' with {type: 'json'};
import {partInput} from './answers.js';

const tf = globalThis.tf;

// convert_image_to_tensor.js: the (rotated) ROI of the image warped bilinearly into the
// model's input size with a zero border, scaled to [0, 1]. -> {tensor, padding}
export function cropToTensor(image3d, imageSize, normRect, size) {
  const {roi, padding} = padRoi(roiOf(imageSize, normRect), size);
  const tensor = tf.tidy(() => {
    const matrix = tf.tensor2d(projectiveTransform(roi, imageSize, size), [1, 8]);
    const warped = tf.image.transform(tf.expandDims(image3d), matrix, 'bilinear', 'constant', 0, [size.height, size.width]);
    return tf.add(tf.mul(warped, 1 / 255), 0);   // shift_image_value: [0, 255] -> [0, 1]
  });
  return {tensor, padding};
}

// non_max_suppression.js: by falling score, TF.js's NMS, in that order.
async function suppress(detections, maxHands, iouThreshold) {
  const sorted = [...detections].sort((a, b) => b.score - a.score);
  const boxes = tf.tensor2d(sorted.map((d) => [d.box.yMin, d.box.xMin, d.box.yMax, d.box.xMax]), [sorted.length, 4]);
  const scores = tf.tensor1d(sorted.map((d) => d.score));
  let kept = null;
  try {
    kept = await tf.image.nonMaxSuppressionAsync(boxes, scores, maxHands, iouThreshold);
    const ids = new Set(await kept.data());
    return sorted.filter((_, i) => ids.has(i));
  } finally {
    tf.dispose([boxes, scores, kept]);
  }
}

const sizeOf = (shape) => ({height: shape[1], width: shape[2]});

// The library's MediaPipeHandsTfjsDetector on any pair of runners. estimateHands(image,
// {staticImageMode, detectionScore}) -> [{keypoints [{x, y}] px, keypoints3D [{x, y, z}] m,
// handedness (the model's label), score}]. Video mode tracks each hand from its previous
// landmarks and runs the palm detector only while fewer than maxHands are tracked.
export class HandPipeline {
  constructor({palm, landmark, manifest, maxHands = 2, parts = ['detector_full', 'landmark_full']}) {
    this.palm = palm;
    this.landmark = landmark;
    this.parts = parts;
    this.palmSpec = manifest.input;
    this.landmarkSpec = manifest.landmark_input;
    this.maxHands = maxHands;
    this.anchors = ssdAnchors(manifest.anchors);
    this.decode = manifest.decode;
    this.pipeline = manifest.pipeline;
    this.labels = manifest.labels || TWINS.hands.handedness;
    this.palmSize = sizeOf(manifest.input.shape);
    this.landmarkSize = sizeOf(manifest.landmark_input.shape);
    this.defaultScore = this.decode.minScoreThresh;
    this.tracked = null;   // hand ROIs from the previous frame's landmarks
  }

  reset() {
    this.tracked = null;
  }

  dispose() {
    this.palm.dispose();
    this.landmark.dispose();
  }

  // Both models on the answer-check pattern (tensor/answers.js partInput): the page's warm-up, and its
  // answer in the pipeline's roles, keyed by the manifest's part names.
  // -> {detector_<variant>: {logits, boxes}, landmark_<variant>: {landmarks, handflag, ...}}
  async answer() {
    const out = {};
    for (const [runner, spec, part] of [[this.palm, this.palmSpec, this.parts[0]],
                                        [this.landmark, this.landmarkSpec, this.parts[1]]]) {
      const input = partInput(spec);
      try {
        const roles = await runner.run(input);
        out[part] = roles.detections ? splitDetections(roles.detections, this.decode.numCoords) : roles;
      } finally {
        input.dispose();
      }
    }
    return out;
  }

  // detector.js detectPalm -> palms in image coordinates (0..1).
  async detectPalms(image3d, imageSize, minScore) {
    const {tensor, padding} = cropToTensor(image3d, imageSize, null, this.palmSize);
    let out;
    try {
      out = await this.palm.run(tensor);
    } finally {
      tensor.dispose();
    }
    const {logits, boxes} = out.detections ? splitDetections(out.detections, this.decode.numCoords) : out;
    const found = decodeDetections(logits, boxes, this.anchors, this.decode, minScore);
    if (!found.length) return [];
    const kept = await suppress(found, this.maxHands, this.pipeline.nms.minSuppressionThreshold);
    return kept.map((d) => removeDetectionLetterbox(d, padding));
  }

  // detector.js handLandmarks -> {landmarks (normalised), worldLandmarks, score, handedness} or null.
  async handLandmarks(image3d, imageSize, rect) {
    const {tensor, padding} = cropToTensor(image3d, imageSize, rect, this.landmarkSize);
    let out;
    try {
      out = await this.landmark.run(tensor);
    } finally {
      tensor.dispose();
    }
    const score = out.handflag[0];
    if (score < this.pipeline.hand_presence_threshold) return null;
    const cfg = this.pipeline.landmarks;
    return {
      landmarks: projectLandmarks(out.landmarks, rect, padding, cfg),
      worldLandmarks: projectWorldLandmarks(out.world_landmarks, rect, cfg.numLandmarks),
      score,
      handedness: out.handedness[0] >= 0.5 ? this.labels[0] : this.labels[1],
    };
  }

  async estimateHands(image, {staticImageMode = false, detectionScore = null} = {}) {
    const imageSize = {width: image.width, height: image.height};
    const image3d = tf.tidy(() => tf.cast(tf.browser.fromPixels(image), 'float32'));
    try {
      let rects = this.tracked;
      if (staticImageMode || !rects || rects.length < this.maxHands) {
        const palms = await this.detectPalms(image3d, imageSize, detectionScore == null ? this.defaultScore : detectionScore);
        if (!palms.length) {
          this.reset();
          return [];
        }
        rects = palms.map((p) => palmToRoi(p, imageSize, this.pipeline.palm_to_roi));
      }
      rects = associateRects(rects, this.pipeline.min_similarity_threshold);
      const hands = [];
      this.tracked = [];
      for (const rect of rects) {
        const hand = await this.handLandmarks(image3d, imageSize, rect);
        if (!hand) continue;
        this.tracked.push(transformRect(landmarksToRect(hand.landmarks, imageSize), imageSize, this.pipeline.landmarks_to_roi));
        hands.push({
          keypoints: hand.landmarks.map((p) => ({x: p.x * imageSize.width, y: p.y * imageSize.height})),
          keypoints3D: hand.worldLandmarks,
          handedness: hand.handedness,
          score: hand.score,
        });
      }
      return hands;
    } finally {
      image3d.dispose();
    }
  }
}
