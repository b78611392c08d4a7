// Your own image classes ("Teach" on /classify): recorded feature vectors, the classifier's
// second output (EfficientNet-Lite0's pooled head, 1280 numbers), matched by k nearest
// neighbours on cosine distance (example_sets.js), as Teachable Machine does on MobileNet's.
// A KNN, not a trained head: a class is usable from its first example, adding one is
// instant, and the file holds the examples themselves (the server matches the same ones).
// modelcontract/custom_classes.py is the Python twin.
import {ExampleSets} from './example_sets.js';
import TWINS from './twins.json' with {type: 'json'};

// format, size, limits, max_distance, k, decimals, noun (twins.json; custom_classes.py reads the same).
const KIND = TWINS.example_sets.custom_classes;
export const SIZE = KIND.size;

export function cosineDistance(a, b) {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return 1 - dot / ((Math.sqrt(na) * Math.sqrt(nb)) || 1);
}

// Every example votes however far (2, the cosine distance's most): an image is always one of
// your classes; the confidence says how sure.
export const CLASS_SETS = new ExampleSets({...KIND, distance: cosineDistance});
