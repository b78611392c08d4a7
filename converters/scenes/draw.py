"""Synthetic scenes with exact ground truth, one drawing function per Ultralytics task.

Each function takes a seeded ``numpy.random.Generator`` and returns ``(image, truth)``: an
RGB uint8 image and what is in it, in image pixels:
- segment:  [{"class_id", "polygon": [[x, y], ...]}]  (the filled outline drawn)
- pose:     [{"class_id", "box": [x1, y1, x2, y2], "keypoints": [[x, y, visible], ...]}]
- obb:      [{"class_id", "corners": [[x, y] x 4]}]   (the rotated rectangle drawn or bounding)
- classify: {"class_id"}
- semantic: as segment (Ultralytics rasterises the polygons and adds a "background" class)
- depth:    {"depth": float32 (H, W) metres, "objects": [{"kind", "distance", "box": [x1, y1, x2, y2]}]}
The shapes differ by outline, not colour (colours are random), so a model has to learn form.
"""
from __future__ import annotations

import math

import cv2
import numpy as np

SEGMENT_NAMES = ["circle", "square", "triangle"]
CLASSIFY_NAMES = SEGMENT_NAMES
OBB_NAMES = ["bar", "ellipse"]
POSE_NAMES = ["figure"]
# A stick figure: head, left hand, right hand, left foot, right foot ("left" = the image's left
# when upright); a horizontal flip swaps the pairs.
KEYPOINT_NAMES = ["head", "left_hand", "right_hand", "left_foot", "right_foot"]
KPT_SHAPE = [len(KEYPOINT_NAMES), 3]
FLIP_IDX = [0, 2, 1, 4, 3]
SKELETON = [[0, 1], [0, 2], [0, 3], [0, 4]]  # drawn through the body's centre line


def background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth random gradient with mild noise: no flat colour to key on."""
    corners = rng.integers(40, 216, size=(2, 2, 3)).astype(np.float32)
    image = cv2.resize(corners, (size, size), interpolation=cv2.INTER_LINEAR)
    image += rng.normal(0, 6, size=image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def _colour(rng: np.random.Generator, image: np.ndarray, centre) -> tuple:
    """A colour far from the background under the shape's centre (always visible)."""
    under = image[int(centre[1]) % image.shape[0], int(centre[0]) % image.shape[1]].astype(int)
    while True:
        colour = rng.integers(0, 256, size=3)
        if np.abs(colour - under).sum() > 180:
            return tuple(int(c) for c in colour)


def _polygon(kind: str, cx: float, cy: float, r: float, angle: float) -> np.ndarray:
    if kind == "circle":
        t = np.linspace(0, 2 * math.pi, 48, endpoint=False)
    elif kind == "square":
        t = np.array([0.25, 0.75, 1.25, 1.75]) * math.pi
    else:  # triangle
        t = np.array([-0.5, 1 / 6, 5 / 6]) * math.pi
    t = t + angle
    return np.stack([cx + r * np.cos(t), cy + r * np.sin(t)], axis=1)


def _place(rng, size: int, placed: list, r: float) -> tuple[float, float] | None:
    """A centre at least r inside the image and apart from the shapes placed (no overlap)."""
    for _ in range(50):
        cx, cy = rng.uniform(r + 2, size - r - 2, size=2)
        if all(math.hypot(cx - px, cy - py) > r + pr + 4 for px, py, pr in placed):
            placed.append((cx, cy, r))
            return cx, cy
    return None


def segment_scene(rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, list]:
    image, placed, truth = background(rng, size), [], []
    for _ in range(rng.integers(1, 5)):
        class_id = int(rng.integers(len(SEGMENT_NAMES)))
        r = rng.uniform(0.08, 0.2) * size
        centre = _place(rng, size, placed, r)
        if centre is None:
            continue
        polygon = _polygon(SEGMENT_NAMES[class_id], *centre, r, rng.uniform(0, 2 * math.pi))
        cv2.fillPoly(image, [np.round(polygon * 16).astype(np.int32)], _colour(rng, image, centre),
                     lineType=cv2.LINE_AA, shift=4)
        truth.append({"class_id": class_id, "polygon": polygon.tolist()})
    return image, truth


def classify_scene(rng: np.random.Generator, size: int = 128) -> tuple[np.ndarray, dict]:
    image = background(rng, size)
    class_id = int(rng.integers(len(CLASSIFY_NAMES)))
    r = rng.uniform(0.2, 0.4) * size
    centre = rng.uniform(r + 2, size - r - 2, size=2)
    polygon = _polygon(CLASSIFY_NAMES[class_id], *centre, r, rng.uniform(0, 2 * math.pi))
    cv2.fillPoly(image, [np.round(polygon * 16).astype(np.int32)], _colour(rng, image, centre),
                 lineType=cv2.LINE_AA, shift=4)
    return image, {"class_id": class_id}


def _figure_points(cx: float, cy: float, h: float, lean: float, rng) -> dict:
    """The stick figure's joints: neck/hip on a line leaning by ``lean``, limbs spread at random."""
    up = np.array([math.sin(lean), -math.cos(lean)])
    side = np.array([-up[1], up[0]])  # the image's right when upright
    centre = np.array([cx, cy])
    head = centre + up * 0.38 * h
    neck, hip = centre + up * 0.22 * h, centre - up * 0.1 * h
    arm = 0.3 * h
    left_hand = neck + arm * (-side * rng.uniform(0.7, 1.0) + up * rng.uniform(-0.6, 0.6))
    right_hand = neck + arm * (side * rng.uniform(0.7, 1.0) + up * rng.uniform(-0.6, 0.6))
    left_foot = hip + 0.4 * h * (-up + -side * rng.uniform(0.2, 0.6))
    right_foot = hip + 0.4 * h * (-up + side * rng.uniform(0.2, 0.6))
    return {"head": head, "neck": neck, "hip": hip, "left_hand": left_hand, "right_hand": right_hand,
            "left_foot": left_foot, "right_foot": right_foot}


def pose_scene(rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, list]:
    image, placed, truth = background(rng, size), [], []
    for _ in range(rng.integers(1, 4)):
        h = rng.uniform(0.3, 0.55) * size
        centre = _place(rng, size, placed, 0.5 * h)
        if centre is None:
            continue
        p = _figure_points(*centre, h, rng.uniform(-0.3, 0.3), rng)
        colour = _colour(rng, image, centre)
        width = max(2, int(round(h / 25)))

        def line(a, b, p=p, colour=colour, width=width):
            cv2.line(image, tuple(np.round(p[a] * 16).astype(int)), tuple(np.round(p[b] * 16).astype(int)),
                     colour, width, cv2.LINE_AA, shift=4)

        for a, b in (("neck", "hip"), ("neck", "left_hand"), ("neck", "right_hand"),
                     ("hip", "left_foot"), ("hip", "right_foot")):
            line(a, b)
        cv2.circle(image, tuple(np.round(p["head"] * 16).astype(int)), int(round(0.1 * h * 16)), colour, -1,
                   cv2.LINE_AA, shift=4)
        points = np.array([p[name] for name in KEYPOINT_NAMES])
        every = np.concatenate([points, [p["head"] + [0, -0.1 * h]]])
        lo, hi = every.min(0) - width, every.max(0) + width
        truth.append({"class_id": 0, "box": [*np.clip(lo, 0, size).tolist(), *np.clip(hi, 0, size).tolist()],
                      "keypoints": [[float(x), float(y), 2.0] for x, y in points]})
    return image, truth


def obb_scene(rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, list]:
    image, placed, truth = background(rng, size), [], []
    for _ in range(rng.integers(1, 5)):
        class_id = int(rng.integers(len(OBB_NAMES)))
        long_side = rng.uniform(0.2, 0.45) * size
        short_side = long_side * rng.uniform(0.25, 0.5)
        centre = _place(rng, size, placed, 0.5 * long_side)
        if centre is None:
            continue
        angle = rng.uniform(0, 180)
        rect = (tuple(float(c) for c in centre), (float(long_side), float(short_side)), float(angle))
        colour = _colour(rng, image, centre)
        if OBB_NAMES[class_id] == "bar":
            cv2.fillPoly(image, [np.round(cv2.boxPoints(rect) * 16).astype(np.int32)], colour, cv2.LINE_AA, shift=4)
        else:
            cv2.ellipse(image, rect, colour, -1, cv2.LINE_AA)
        truth.append({"class_id": class_id, "corners": cv2.boxPoints(rect).tolist()})
    return image, truth


# The depth scene: a room seen by a level camera CAMERA_HEIGHT above its floor and CEILING below
# its ceiling, focal length FOCAL image widths, its horizon a random row (a shifted lens, so the
# floor's depth stays f*h/(y - horizon)). Fixed heights and focal length make metric depth
# learnable from one image: floor and ceiling recede to the horizon, the far wall's band is
# f*(CAMERA_HEIGHT + CEILING)/distance rows high, an object's size and foot row give its distance.
DEPTH_NAMES = ["depth"]
CAMERA_HEIGHT, CEILING = 1.5, 1.0  # metres
FOCAL = 0.8
DEPTH_KINDS = ["box", "ball"]
FLOOR_TILE, WALL_PANEL, CEILING_TILE = 0.6, 1.0, 1.2  # metres


def _depth_objects(rng, size: int, horizon: float, wall: float) -> list[dict]:
    """Boxes (front faces) and balls standing on the floor, between the nearest floor row in view
    and the wall, at most 4, sorted far to near."""
    f = FOCAL * size
    nearest = max(1.5, f * CAMERA_HEIGHT / (size - horizon))  # a foot below the image is out of view
    objects = []
    for _ in range(rng.integers(1, 5)):
        kind = DEPTH_KINDS[int(rng.integers(len(DEPTH_KINDS)))]
        z = rng.uniform(nearest, 0.85 * wall)
        x = (rng.uniform(0.1, 0.9) * size - size / 2) * z / f  # metres right of the optical axis
        if kind == "box":
            width, height = rng.uniform(0.4, 1.2), rng.uniform(0.4, 1.8)
            objects.append({"kind": kind, "z": z, "x": x, "width": width, "height": height})
        else:
            objects.append({"kind": kind, "z": z, "x": x, "radius": rng.uniform(0.2, 0.6)})
        objects[-1]["colour"] = rng.integers(30, 256, size=3).astype(np.float32)
    return sorted(objects, key=lambda o: -o["z"])


def _project(obj: dict, size: int, horizon: float) -> tuple[float, float, float, float]:
    """An object's box in scene pixels (x1, y1, x2, y2)."""
    f = FOCAL * size
    u = size / 2 + f * obj["x"] / obj["z"]
    foot = horizon + f * CAMERA_HEIGHT / obj["z"]
    if obj["kind"] == "box":
        half, top = f * obj["width"] / 2 / obj["z"], foot - f * obj["height"] / obj["z"]
    else:
        half = f * obj["radius"] / obj["z"]
        top = foot - 2 * half
    return u - half, top, u + half, foot


def _surface(obj: dict, box, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inside, depth, shade) of an object at sample points x, y (scene pixels)."""
    x1, y1, x2, y2 = box
    if obj["kind"] == "box":  # a front face, lit from above
        inside = (x >= x1) & (x < x2) & (y >= y1) & (y < y2)
        return inside, np.full_like(x, obj["z"]), 0.75 + 0.25 * (y2 - y) / max(y2 - y1, 1e-6)
    r = (x2 - x1) / 2
    d2 = ((x - (x1 + x2) / 2) ** 2 + (y - (y1 + y2) / 2) ** 2) / r**2
    bulge = np.sqrt(np.clip(1 - d2, 0, 1))
    return d2 < 1, obj["z"] - obj["radius"] * bulge, 0.45 + 0.55 * bulge  # the sphere's near side


def _render_depth(scene: dict, size: int, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """(depth, colour) at ``scale`` samples per scene pixel, a z-buffer over floor, wall and objects."""
    n = size * scale
    xs = (np.arange(n, dtype=np.float32) + 0.5) / scale  # sample centres, scene pixels
    f, horizon, wall = FOCAL * size, scene["horizon"], scene["wall"]
    # Floor, ceiling and wall depend on the row only.
    below, above = np.maximum(xs - horizon, 1e-6), np.maximum(horizon - xs, 1e-6)
    row_depth = np.minimum(np.where(xs > horizon, f * CAMERA_HEIGHT / below, f * CEILING / above), wall)
    surface = np.where(row_depth >= wall, 1, np.where(xs > horizon, 0, 2))[:, None]  # floor, wall, ceiling
    # Tiles and panels of one size in metres: texture that shrinks with distance.
    lateral = (xs[None, :] - size / 2) * row_depth[:, None] / f
    floor = (np.floor(lateral / FLOOR_TILE) + np.floor(row_depth / FLOOR_TILE)[:, None]) % 2
    ceiling = (np.floor(lateral / CEILING_TILE) + np.floor(row_depth / CEILING_TILE)[:, None]) % 2
    panel = np.floor(lateral / WALL_PANEL) % 2
    palette = np.stack([*scene["floor"], scene["wall_colour"], scene["wall_colour"] - 25.0,
                        scene["ceiling"], scene["ceiling"] + 25.0])
    index = np.choose(surface, [floor, 2 + panel, 4 + ceiling])
    colour = palette[index.astype(np.intp)]
    colour += ((surface == 1) * xs[:, None] / size * 30.0)[..., None]  # the wall darkens upwards
    depth = np.repeat(row_depth[:, None], n, axis=1).astype(np.float32)
    for obj in scene["objects"]:  # far to near; the z-test keeps the nearest surface
        box = _project(obj, size, horizon)
        r1, c1 = (max(0, int(np.floor(v * scale))) for v in box[1::-1])
        r2, c2 = (min(n, int(np.ceil(v * scale))) for v in box[:1:-1])
        if r1 >= r2 or c1 >= c2:
            continue
        window = np.s_[r1:r2, c1:c2]
        inside, surface, shade = _surface(obj, box, *np.meshgrid(xs[c1:c2], xs[r1:r2]))
        nearer = inside & (surface < depth[window])
        depth[window] = np.where(nearer, surface, depth[window])
        colour[window] = np.where(nearer[..., None], obj["colour"] * shade[..., None], colour[window])
    haze = 1 - np.exp(-depth / 25.0)  # aerial perspective: far surfaces fade to the haze colour
    colour += (scene["haze"] - colour) * haze[..., None]
    return depth, colour


def depth_scene(rng: np.random.Generator, size: int = 256) -> tuple[np.ndarray, dict]:
    """A room: floor and ceiling running to a wall, objects standing on the floor; truth: the
    depth of every pixel."""
    scene = {"horizon": rng.uniform(0.35, 0.5) * size, "wall": rng.uniform(6.0, 12.0),
             "floor": rng.integers(30, 226, size=(2, 3)).astype(np.float32),
             "wall_colour": rng.integers(60, 226, size=3).astype(np.float32),
             "ceiling": rng.integers(60, 206, size=3).astype(np.float32),
             "haze": rng.integers(150, 231, size=3).astype(np.float32)}
    scene["objects"] = _depth_objects(rng, size, scene["horizon"], scene["wall"])
    depth, _ = _render_depth(scene, size, 1)
    _, colour = _render_depth(scene, size, 2)  # supersampled: no aliasing on far tiles
    image = cv2.resize(colour, (size, size), interpolation=cv2.INTER_AREA)
    image = np.clip(image + rng.normal(0, 4, size=image.shape), 0, 255).astype(np.uint8)
    objects = [{"kind": o["kind"], "distance": float(o["z"]),
                "box": [float(v) for v in np.clip(_project(o, size, scene["horizon"]), 0, size)]}
               for o in scene["objects"]]
    return image, {"depth": depth, "objects": objects}


SCENES = {"segment": segment_scene, "pose": pose_scene, "obb": obb_scene, "classify": classify_scene,
          "semantic": segment_scene, "depth": depth_scene}
NAMES = {"segment": SEGMENT_NAMES, "pose": POSE_NAMES, "obb": OBB_NAMES, "classify": CLASSIFY_NAMES,
         "semantic": SEGMENT_NAMES, "depth": DEPTH_NAMES}
