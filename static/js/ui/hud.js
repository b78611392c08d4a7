// Heads-up display: FPS and per-stage milliseconds (exponentially smoothed), tensor count.
const tf = globalThis.tf;
const SMOOTHING = 0.1;

export class Hud {
  constructor(element, stages) {
    this.element = element;
    this.stages = stages;
    this.ms = Object.fromEntries(stages.map((s) => [s, null]));
    this.fps = null;
    this.lastFrameAt = null;
  }

  static smooth(previous, value) {
    return previous == null ? value : previous + SMOOTHING * (value - previous);
  }

  // timings: {stage: ms} of one processed frame.
  frame(timings) {
    const now = performance.now();
    if (this.lastFrameAt != null) this.fps = Hud.smooth(this.fps, 1000 / (now - this.lastFrameAt));
    this.lastFrameAt = now;
    for (const [stage, value] of Object.entries(timings)) this.ms[stage] = Hud.smooth(this.ms[stage], value);
    this.render();
  }

  reset() {
    this.fps = null;
    this.lastFrameAt = null;
  }

  render() {
    if (!this.element) return;
    const parts = [`${this.fps == null ? '–' : this.fps.toFixed(1)} FPS`];
    for (const s of this.stages) parts.push(`${s} ${this.ms[s] == null ? '–' : this.ms[s].toFixed(1)} ms`);
    parts.push(`tensors ${tf.memory().numTensors}`);
    this.element.textContent = parts.join(' · ');
    this.element.dataset.fps = this.fps == null ? '' : this.fps.toFixed(2);
    this.element.dataset.numTensors = String(tf.memory().numTensors);
  }
}
