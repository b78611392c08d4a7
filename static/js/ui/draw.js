// Drawing on the display canvas: the frame (mirrored for a selfie camera), boxes with
// labels (and a YOLO task's masks, keypoints or rotated box), hand keypoints and skeletons.
// Coordinates arrive in source pixels.

// Golden-angle hues: neighbouring class ids get distinct colours. [hue in degrees,
// saturation, lightness], which classColor writes as CSS and dense-view.js as RGB.
export function classHsl(classId) {
  return [(classId * 137.508) % 360, 0.85, 0.5];
}

export function classColor(classId) {
  const [h, s, l] = classHsl(classId);
  return `hsl(${h}, ${s * 100}%, ${l * 100}%)`;
}

export function drawFrame(ctx, frame, mirrored) {
  const {width, height} = ctx.canvas;
  ctx.save();
  if (mirrored) {
    ctx.translate(width, 0);
    ctx.scale(-1, 1);
  }
  ctx.drawImage(frame, 0, 0, width, height);
  ctx.restore();
}

// Source x -> canvas x (the canvas has the source's size; a mirrored view flips x).
function viewX(x, width, mirrored) {
  return mirrored ? width - x : x;
}

export function drawBoxes(ctx, detections, mirrored) {
  const width = ctx.canvas.width;
  const lineWidth = Math.max(2, Math.round(width / 320));
  ctx.lineWidth = lineWidth;
  ctx.font = `${Math.max(12, Math.round(width / 45))}px system-ui, sans-serif`;
  ctx.textBaseline = 'top';
  for (const d of detections) {
    const [x1, y1, x2, y2] = d.box;
    const left = Math.min(viewX(x1, width, mirrored), viewX(x2, width, mirrored));
    const color = classColor(d.class_id);
    ctx.strokeStyle = color;
    if (d.polygons) drawMask(ctx, d.polygons, color, mirrored);
    if (d.corners) outline(ctx, d.corners, mirrored);   // the rotated box instead of its bounds
    else ctx.strokeRect(left, y1, x2 - x1, y2 - y1);
    if (d.keypoints) drawKeypoints(ctx, d.keypoints, color, mirrored);
    const text = `${d.label} ${(d.score * 100).toFixed(0)}%`;
    const textW = ctx.measureText(text).width + 8;
    const textH = parseInt(ctx.font, 10) + 6;
    const top = y1 - textH >= 0 ? y1 - textH : y1;
    ctx.fillStyle = color;
    ctx.fillRect(left - lineWidth / 2, top, textW, textH);
    ctx.fillStyle = '#fff';
    ctx.fillText(text, left + 4 - lineWidth / 2, top + 3);
  }
}

function outline(ctx, points, mirrored) {
  const width = ctx.canvas.width;
  ctx.beginPath();
  points.forEach(([x, y], i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, viewX(x, width, mirrored), y));
  ctx.closePath();
  ctx.stroke();
}

// An instance mask: its outline polygons filled translucent in the class colour, then stroked.
function drawMask(ctx, polygons, color, mirrored) {
  const width = ctx.canvas.width;
  const path = new Path2D();
  for (const polygon of polygons) {
    polygon.forEach(([x, y], i) => (i ? path.lineTo(viewX(x, width, mirrored), y)
                                      : path.moveTo(viewX(x, width, mirrored), y)));
    path.closePath();
  }
  ctx.save();
  ctx.globalAlpha = 0.35;
  ctx.fillStyle = color;
  ctx.fill(path);
  ctx.restore();
  ctx.stroke(path);
}

// COCO's 17 keypoints (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles).
const COCO_SKELETON = [[15, 13], [13, 11], [16, 14], [14, 12], [11, 12], [5, 11], [6, 12], [5, 6], [5, 7],
  [6, 8], [7, 9], [8, 10], [1, 2], [0, 1], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6]];
// Each limb of the skeleton above by body part (legs, hips and torso, arms, head), so that
// people overlapping in one class colour still read apart.
const LIMB_COLORS = [...Array(4).fill('#ff8000'), ...Array(4).fill('#ff33ff'), ...Array(4).fill('#3399ff'),
  ...Array(7).fill('#00cc44')];
const KEYPOINT_SHOWN = 0.5;   // Ultralytics' plotting threshold on a keypoint's visibility

// Pose keypoints [x, y, confidence]: those at or over Ultralytics' plotting threshold as dots,
// COCO's skeleton between them when there are 17; each drawn as opaque as it is confident.
function drawKeypoints(ctx, keypoints, color, mirrored) {
  const width = ctx.canvas.width;
  const shown = keypoints.map(([x, y, v]) => (v >= KEYPOINT_SHOWN ? [viewX(x, width, mirrored), y, v] : null));
  const opacity = (v) => 0.35 + 0.65 * Math.min(1, v);
  ctx.save();
  if (keypoints.length === 17) {
    COCO_SKELETON.forEach(([a, b], limb) => {
      if (!shown[a] || !shown[b]) return;
      ctx.strokeStyle = LIMB_COLORS[limb];
      ctx.globalAlpha = opacity(Math.min(shown[a][2], shown[b][2]));
      ctx.beginPath();
      ctx.moveTo(shown[a][0], shown[a][1]);
      ctx.lineTo(shown[b][0], shown[b][1]);
      ctx.stroke();
    });
    ctx.strokeStyle = color;
  }
  const r = Math.max(3, Math.round(width / 200));
  ctx.fillStyle = '#fff';
  for (const p of shown) {
    if (!p) continue;
    ctx.globalAlpha = opacity(p[2]);
    ctx.beginPath();
    ctx.arc(p[0], p[1], r, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
  }
  ctx.restore();
}

// MediaPipe's 21-point hand: wrist, then 4 joints per finger, thumb first.
export const HAND_EDGES = [
  [0, 1], [1, 2], [2, 3], [3, 4], [0, 5], [5, 6], [6, 7], [7, 8], [5, 9], [9, 10], [10, 11],
  [11, 12], [9, 13], [13, 14], [14, 15], [15, 16], [13, 17], [0, 17], [17, 18], [18, 19], [19, 20],
];

export function drawHand(ctx, keypoints, color, mirrored, label) {
  const width = ctx.canvas.width;
  const pts = keypoints.map(([x, y]) => [viewX(x, width, mirrored), y]);
  const r = Math.max(3, Math.round(width / 200));
  ctx.lineWidth = Math.max(2, r / 1.5);
  ctx.strokeStyle = color;
  for (const [a, b] of HAND_EDGES) {
    ctx.beginPath();
    ctx.moveTo(...pts[a]);
    ctx.lineTo(...pts[b]);
    ctx.stroke();
  }
  ctx.fillStyle = '#fff';
  for (const [x, y] of pts) {
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
  }
  if (label) {
    ctx.font = `${Math.max(14, Math.round(width / 40))}px system-ui, sans-serif`;
    ctx.fillStyle = color;
    ctx.textBaseline = 'top';
    // Beside the wrist, kept inside the canvas.
    const textW = ctx.measureText(label).width;
    const textH = parseInt(ctx.font, 10);
    const x = Math.max(0, Math.min(pts[0][0] + r * 2, width - textW - 2));
    const y = Math.max(0, Math.min(pts[0][1] + r * 2, ctx.canvas.height - textH - 2));
    ctx.fillText(label, x, y);
  }
}

// A large emoji (or any short text) centred at source (x, y); a mirrored view flips x only,
// so the glyph itself stays readable.
export function drawEmoji(ctx, text, x, y, size, mirrored) {
  ctx.save();
  ctx.font = `${Math.round(size)}px "Noto Color Emoji", "Apple Color Emoji", "Segoe UI Emoji", sans-serif`;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillText(text, viewX(x, ctx.canvas.width, mirrored), y);
  ctx.restore();
}
