// Rotated boxes [cx, cy, w, h, angle (radians)] of a YOLO OBB head, as Ultralytics treats them;
// the twin of modelcontract/rotated.py: probabilistic IoU (each box as a Gaussian), its fast
// NMS (a box goes when any higher-scored box overlaps it >= the threshold, kept or not), the
// angle brought into [0, pi/2) and the four corners.
const EPS = 1e-7;

function covariance([, , w, h, angle]) {
  const a = w * w / 12;
  const b = h * h / 12;
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  return [a * cos * cos + b * sin * sin, a * sin * sin + b * cos * cos, (a - b) * cos * sin];
}

export function probiou(p, q) {
  const [a1, b1, c1] = covariance(p);
  const [a2, b2, c2] = covariance(q);
  const dx = p[0] - q[0];
  const dy = p[1] - q[1];
  const den = (a1 + a2) * (b1 + b2) - (c1 + c2) ** 2 + EPS;
  const t1 = ((a1 + a2) * dy * dy + (b1 + b2) * dx * dx) / den * 0.25;
  const t2 = ((c1 + c2) * -dx * dy) / den * 0.5;
  const det1 = Math.max(a1 * b1 - c1 * c1, 0);
  const det2 = Math.max(a2 * b2 - c2 * c2, 0);
  const t3 = Math.log(((a1 + a2) * (b1 + b2) - (c1 + c2) ** 2) / (4 * Math.sqrt(det1 * det2) + EPS) + EPS) * 0.5;
  const bd = Math.min(Math.max(t1 + t2 + t3, EPS), 100);
  return 1 - Math.sqrt(1 - Math.exp(-bd) + EPS);
}

// Indices kept, by score descending (equal scores by index).
export function fastNms(boxes, scores, iou) {
  const order = Array.from(scores.keys()).sort((i, j) => scores[j] - scores[i] || i - j);
  if (iou >= 1) return order;   // no suppression: the model's NMS ran inside it
  return order.filter((i, rank) => !order.slice(0, rank).some((j) => probiou(boxes[j], boxes[i]) >= iou));
}

export function regularize([cx, cy, w, h, angle]) {
  const mod = (v, m) => v - Math.floor(v / m) * m;   // Python's %, never negative
  const swap = mod(angle, Math.PI) >= Math.PI / 2;
  return [cx, cy, swap ? h : w, swap ? w : h, mod(angle, Math.PI / 2)];
}

export function corners([cx, cy, w, h, angle]) {
  const cos = Math.cos(angle);
  const sin = Math.sin(angle);
  const v1 = [w / 2 * cos, w / 2 * sin];
  const v2 = [-h / 2 * sin, h / 2 * cos];
  return [[cx + v1[0] + v2[0], cy + v1[1] + v2[1]], [cx + v1[0] - v2[0], cy + v1[1] - v2[1]],
          [cx - v1[0] - v2[0], cy - v1[1] - v2[1]], [cx - v1[0] + v2[0], cy - v1[1] + v2[1]]];
}
