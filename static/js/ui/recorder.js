// Records a canvas as a WebM video (MediaRecorder on canvas.captureStream): what the page
// draws, boxes, IDs and counting line included, from the camera or a video file.
const TYPES = ['video/webm;codecs=vp9', 'video/webm;codecs=vp8', 'video/webm'];

export class CanvasRecorder {
  constructor(canvas, fps = 30) {
    Object.assign(this, {canvas, fps});
    this.recorder = null;
  }

  static supported() {
    return typeof MediaRecorder !== 'undefined' && TYPES.some((t) => MediaRecorder.isTypeSupported(t));
  }

  get recording() {
    return this.recorder !== null;
  }

  start() {
    const mimeType = TYPES.find((t) => MediaRecorder.isTypeSupported(t));
    this.chunks = [];
    this.recorder = new MediaRecorder(this.canvas.captureStream(this.fps), {mimeType});
    this.recorder.ondataavailable = (e) => e.data.size && this.chunks.push(e.data);
    this.recorder.start(1000); // a chunk a second, so a long recording is not one buffer
  }

  // Stops and answers the video as one Blob.
  stop() {
    const recorder = this.recorder;
    this.recorder = null;
    return new Promise((resolve) => {
      recorder.onstop = () => {
        recorder.stream.getTracks().forEach((t) => t.stop());
        resolve(new Blob(this.chunks, {type: 'video/webm'}));
      };
      recorder.stop();
    });
  }
}
