// Where a live page's frames come from, and its loop: the camera, a video file or an image
// (picker, drag-and-drop, paste); one frame in flight; pause. Each frame is first copied
// into a CPU-backed canvas, so what is drawn with the results is exactly what was inferred.
// A video file plays in real time (the loop takes the frames it keeps up with), or with
// everyFrame set, frame by frame: every frame of the file once, in order, each awaited.
import {openCamera, stopStream, openVideoFile, decodeImage, acceptFiles, onVideoFrames, CameraError,
  measureFrameRate, seekVideo, videoDuration} from './inputs.js';
import {areModelFiles} from '../runtime/model-file.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const waitingText = (what) => `${what} runs as soon as the model is ready (see the status line).`;

export class FrameSource {
  // process(frame, {mirrored, live, file, source}) -> Promise, frame = {canvas, width, height,
  // grabMs, time}; time (s) is when a live frame was taken, or a file frame's media time.
  // ready() -> whether a frame may start now (model loaded, request rate); onMessage(text)
  // shows a user-facing message ('' clears it); onLoop() runs before each new loop;
  // onProgress(done, total, fps) after each frame of a file run frame by frame.
  // A source chosen before ready() (the model still loading or switching) waits for it:
  // an image runs once, as soon as it may; live frames start then.
  constructor({video, process, ready = () => true, onMessage, onLoop = () => {}, onProgress = () => {}}) {
    Object.assign(this, {video, process, ready, onMessage, onLoop, onProgress});
    this.imageWaiting = null;   // the image whose run waits for ready()
    this.everyFrame = false;
    this.fileRun = null;    // the frame-by-frame run in progress (a newer one ends it)
    this.kind = null;       // 'camera' | 'video' | 'image'
    this.attempt = null;    // the latest choice of source: a camera opening late yields to a file
    this.image = null;      // ImageBitmap of the image source
    this.file = null;       // the uploaded image itself (the server backend sends it as is)
    this.name = '';
    this.busy = false;
    this.paused = false;
    this.stop = null;
    this.canvas = document.createElement('canvas');
    this.ctx = this.canvas.getContext('2d', {willReadFrequently: true});  // fast pixel reads
  }

  grab(source, time = null) {
    const started = performance.now();
    const width = source.videoWidth || source.width;
    const height = source.videoHeight || source.height;
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
    this.ctx.drawImage(source, 0, 0, width, height);
    return {canvas: this.canvas, width, height, grabMs: performance.now() - started, time};
  }

  stopLoop() {
    if (this.stop) this.stop();
    this.stop = null;
    this.fileRun = null;
  }

  // Frames as the video presents them, one in flight. A frame presented while one is in
  // flight is taken the moment it finishes, not at the next presentation: waiting for that
  // idled up to a frame interval (33 ms at 30 fps) after every inference.
  startLoop(mirrored) {
    this.stopLoop();
    this.onLoop();
    let waiting = !this.ready();   // chosen while the model loads: say so until the first frame
    if (waiting) this.onMessage(waitingText(this.kind === 'camera' ? 'The camera' : this.name || 'The video'));
    let fresh = false;             // a frame was presented since the last grab
    const step = () => {
      if (this.busy || this.paused || !this.ready()) return;   // never two frames in flight
      // A stream being stopped or replaced (the camera button again) still calls back once
      // with a 0x0 video: there is no frame to take.
      if (!this.video.videoWidth || !this.video.videoHeight) return;
      if (waiting) {
        waiting = false;
        this.onMessage('');
      }
      fresh = false;
      this.busy = true;
      this.process(this.grab(this.video, performance.now() / 1000), {mirrored, live: true, file: null, source: this.video})
        // A loop that was stopped meanwhile leaves the message line to the source now chosen.
        .catch((err) => { if (this.stop === stop) this.onMessage(`Processing failed: ${err.message}`); })
        .finally(() => {
          this.busy = false;
          if (fresh && this.stop === stop) step();
        });
    };
    const stop = this.stop = onVideoFrames(this.video, () => {
      fresh = true;
      step();
    });
  }

  // Every frame of the video file: seek to the middle of frame i at the file's frame rate
  // (so two runs see the same frames), process it, report progress; pause holds it.
  async runFile() {
    this.stopLoop();
    const run = this.fileRun = {};
    const video = this.video;
    const current = () => this.fileRun === run;
    while (this.busy) await sleep(10);    // the last live frame
    const fps = await measureFrameRate(video);
    const duration = await videoDuration(video);
    if (!current()) return;
    const total = Math.max(1, Math.floor(duration * fps + 1e-6));
    this.onLoop();
    this.onProgress(0, total, fps);
    if (!this.ready()) this.onMessage(waitingText(this.name || 'The video'));
    for (let i = 0; i < total; i++) {
      while ((this.paused || !this.ready()) && current()) await sleep(50);
      if (!current()) return;
      if (i === 0) this.onMessage('');
      await seekVideo(video, Math.min((i + 0.5) / fps, duration));
      if (!current()) return;
      this.busy = true;
      try {
        await this.process(this.grab(video, (i + 0.5) / fps), {mirrored: false, live: true, file: null, source: video});
      } catch (err) {
        this.onMessage(`Processing failed at frame ${i + 1}: ${err.message}`);
        return;
      } finally {
        this.busy = false;
      }
      this.onProgress(i + 1, total, fps);
    }
  }

  // A video file by the current mode.
  playFile() {
    if (this.everyFrame) return this.runFile();
    this.video.loop = true;
    this.video.play().catch(() => {});
    this.startLoop(false);
    return Promise.resolve();
  }

  // The image source once: at once when ready(), else as soon as it is (a rerun asked while
  // it waits is that same run; a newer source ends the wait).
  async runImage() {
    const image = this.image;
    if (!image || this.imageWaiting === image) return;
    if (!this.ready()) {
      this.imageWaiting = image;
      const ready = await this.waitReady(image);
      if (this.imageWaiting === image) this.imageWaiting = null;
      if (!ready) return;
    }
    while (this.busy) await sleep(10);
    this.busy = true;
    try {
      await this.process(this.grab(this.image), {mirrored: false, live: false, file: this.file, source: this.image});
    } catch (err) {
      this.onMessage(`Processing failed: ${err.message}`);
    } finally {
      this.busy = false;
    }
  }

  // Resolves true once ready(), false when `image` stopped being the source first.
  async waitReady(image) {
    this.onMessage(waitingText(this.name || 'The image'));
    const current = () => this.kind === 'image' && this.image === image;
    while (!this.ready() && current()) await sleep(50);
    if (!current()) return false;
    this.onMessage('');
    return true;
  }

  async startCamera() {
    // The camera takes a while to open; a file picked meanwhile wins (and stops the camera's
    // play(), whose failure is then no news to the user).
    const attempt = this.attempt = {};
    try {
      await openCamera(this.video);
    } catch (err) {
      if (this.attempt !== attempt) return false;
      this.onMessage(err instanceof CameraError ? err.message : `Camera failed: ${err.message}`);
      return false;
    }
    if (this.attempt !== attempt) {
      stopStream(this.video);
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
    this.attempt = {};
    try {
      if (file.type.startsWith('video/')) {
        stopStream(this.video);
        await openVideoFile(this.video, file);
        Object.assign(this, {kind: 'video', name: file.name});
        this.onMessage('');
        // A file run goes on after the source is reported; it reports its own failure.
        this.playFile().catch((err) => this.onMessage(err.message));
        return;
      }
      const image = await decodeImage(file);
      this.stopLoop();
      stopStream(this.video);
      this.video.pause();
      if (this.image) this.image.close();
      Object.assign(this, {kind: 'image', image, file, name: file.name});
      this.onMessage('');   // before the run, which shows its own failure (e.g. server unreachable)
      await this.runImage();
    } catch (err) {
      this.onMessage(err.message);
    }
  }

  // Re-run what was showing (after a model or backend change).
  async restart() {
    if (this.kind === 'image') await this.runImage();
    else if (this.kind === 'video') this.playFile().catch((err) => this.onMessage(err.message));
    else if (this.kind) this.startLoop(true);
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
      const input = $(id);
      if (!input) continue;
      const take = () => {
        const files = Array.from(input.files);
        input.value = ''; // so that picking the same file again is a change too (a rerun)
        after(this.useFiles(files));
      };
      input.addEventListener('change', take);
      // A file picked in the page's first moment, before this module ran, had no listener yet.
      if (input.files.length) take();
    }
    acceptFiles($('stage'), (files) => {
      // A model's files dropped where frames go: the page's model drop takes them.
      if (this.onModelFiles && areModelFiles(files)) this.onModelFiles(files);
      else after(this.useFiles(files));
    });
    $('pause-button').addEventListener('click', () => {
      $('pause-button').textContent = this.togglePause() ? 'Resume' : 'Pause';
    });
  }
}
