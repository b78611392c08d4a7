// Where a live page's frames come from, and its loop: the camera, a video file or an image
// (picker, drag-and-drop, paste); one frame in flight; pause. Each frame is first copied
// into a CPU-backed canvas, so what is drawn with the results is exactly what was inferred.
import {openCamera, stopStream, openVideoFile, decodeImage, acceptFiles, onVideoFrames, CameraError} from './inputs.js';

export class FrameSource {
  // process(frame, {mirrored, live, file, source}) -> Promise, frame = {canvas, width, height, grabMs}
  // ready() -> whether a frame may start now (model loaded, request rate); onMessage(text)
  // shows a user-facing message ('' clears it); onLoop() runs before each new loop.
  constructor({video, process, ready = () => true, onMessage, onLoop = () => {}}) {
    Object.assign(this, {video, process, ready, onMessage, onLoop});
    this.kind = null;       // 'camera' | 'video' | 'image'
    this.image = null;      // ImageBitmap of the image source
    this.file = null;       // the uploaded image itself (the server backend sends it as is)
    this.name = '';
    this.busy = false;
    this.paused = false;
    this.stop = null;
    this.canvas = document.createElement('canvas');
    this.ctx = this.canvas.getContext('2d', {willReadFrequently: true});  // fast pixel reads
  }

  grab(source) {
    const started = performance.now();
    const width = source.videoWidth || source.width;
    const height = source.videoHeight || source.height;
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
    this.ctx.drawImage(source, 0, 0, width, height);
    return {canvas: this.canvas, width, height, grabMs: performance.now() - started};
  }

  stopLoop() {
    if (this.stop) this.stop();
    this.stop = null;
  }

  startLoop(mirrored) {
    this.stopLoop();
    this.onLoop();
    this.stop = onVideoFrames(this.video, () => {
      if (this.busy || this.paused || !this.ready()) return;   // never two frames in flight
      this.busy = true;
      this.process(this.grab(this.video), {mirrored, live: true, file: null, source: this.video})
        .catch((err) => this.onMessage(`Processing failed: ${err.message}`))
        .finally(() => { this.busy = false; });
    });
  }

  async runImage() {
    if (!this.image) return;
    while (this.busy) await new Promise((r) => setTimeout(r, 10));
    this.busy = true;
    try {
      await this.process(this.grab(this.image), {mirrored: false, live: false, file: this.file, source: this.image});
    } catch (err) {
      this.onMessage(`Processing failed: ${err.message}`);
    } finally {
      this.busy = false;
    }
  }

  async startCamera() {
    try {
      await openCamera(this.video);
    } catch (err) {
      this.onMessage(err instanceof CameraError ? err.message : `Camera failed: ${err.message}`);
      return false;
    }
    this.onMessage('');
    this.kind = 'camera';
    this.name = '';
    this.startLoop(true);   // selfie view: drawn mirrored, like a mirror
    return true;
  }

  async useFiles(files) {
    const file = files[0];
    if (!file) return;
    try {
      if (file.type.startsWith('video/')) {
        stopStream(this.video);
        await openVideoFile(this.video, file);
        Object.assign(this, {kind: 'video', name: file.name});
        this.startLoop(false);
      } else {
        const image = await decodeImage(file);
        this.stopLoop();
        stopStream(this.video);
        this.video.pause();
        if (this.image) this.image.close();
        Object.assign(this, {kind: 'image', image, file, name: file.name});
        this.onMessage('');   // before the run, which shows its own failure (e.g. server unreachable)
        await this.runImage();
        return;
      }
      this.onMessage('');
    } catch (err) {
      this.onMessage(err.message);
    }
  }

  // Re-run what was showing (after a model or backend change).
  async restart() {
    if (this.kind === 'image') await this.runImage();
    else if (this.kind) this.startLoop(this.kind === 'camera');
  }

  togglePause() {
    this.paused = !this.paused;
    return this.paused;
  }

  // The standard controls; ids absent from a page are skipped.
  wire($, onSource = () => {}) {
    const after = (promise) => promise.then(() => onSource(this.kind));
    $('camera-button').addEventListener('click', () => after(this.startCamera()));
    for (const id of ['video-file', 'image-file']) {
      if ($(id)) $(id).addEventListener('change', (e) => after(this.useFiles(Array.from(e.target.files))));
    }
    acceptFiles($('stage'), (files) => after(this.useFiles(files)));
    $('pause-button').addEventListener('click', () => {
      $('pause-button').textContent = this.togglePause() ? 'Resume' : 'Pause';
    });
  }
}
