"""Python twin of static/js/contract/custom_classes.js: your own image classes ("Teach" on the
classify page) as recorded feature vectors, the classifier's second output (EfficientNet-
Lite0's pooled head, 1280 numbers), matched by k nearest neighbours on cosine distance
(example_sets). POST /api/v1/classify takes the page's exported file as its ``custom`` part.
"""
from __future__ import annotations

import math

from .example_sets import ExampleSets
from .twins import TWINS

KIND = TWINS["example_sets"]["custom_classes"]   # format, size, limits, max_distance, k (twins.json)
SIZE = KIND["size"]


def cosine_distance(a, b) -> float:
    dot = na = nb = 0.0
    for x, y in zip(a, b):
        dot += x * y
        na += x * x
        nb += y * y
    return 1 - dot / ((math.sqrt(na) * math.sqrt(nb)) or 1)


# Every example votes however far (max_distance 2, the cosine's most): an image is always one
# of your classes, as in Teachable Machine; the confidence says how sure.
CLASS_SETS = ExampleSets.of(KIND, distance=cosine_distance)
