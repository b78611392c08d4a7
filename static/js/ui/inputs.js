// Where frames come from: the camera, a video file, an image file (picker, drag-and-drop, paste).

// Why the camera did not start ('insecure' | 'denied' | 'missing' | 'busy' | 'failed'), in a
// message that says what to do; the pages show it in their #camera-message.
export class CameraError extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

// getUserMedia exists only in a secure context: https, or http on localhost. A phone that
// opens http://<LAN address> gets no camera API at all; say where the camera does work.
function insecureContextError() {
  const {protocol, host, port, pathname, search} = window.location;
  if (protocol === 'https:') {
    return new CameraError('insecure', 'The camera is blocked: the browser does not count this https page '
      + 'as secure (is the server\'s certificate trusted?). Install the server\'s CA certificate (/ca.crt, see '
      + 'the README "Phones on the LAN") and reload. Images and videos work meanwhile.');
  }
  const local = `http://localhost${port ? `:${port}` : ''}${pathname}${search}`;
  return new CameraError('insecure', `The camera needs a secure page, and ${protocol}//${host} is not one. `
    + `Open https://${host}${pathname}${search} (start the server with make run HTTPS=1 and trust its CA, `
    + `see the README "Phones on the LAN"), or ${local} on the server's own computer. `
    + 'Images and videos work here.');
}

const FAILURES = {
  NotAllowedError: ['denied', 'Camera access was denied. Allow the camera for this site (the camera icon in '
    + 'the address bar, or the browser\'s site settings), then press the camera button again; or use a file below.'],
  SecurityError: ['denied', 'The camera is blocked for this page by the browser\'s settings or policy. Allow it '
    + 'for this site and press the camera button again; or use a file below.'],
  NotFoundError: ['missing', 'No camera was found. Connect or switch on a camera, then press the camera button '
    + 'again; or use a video or image file below.'],
  OverconstrainedError: ['missing', 'No camera here can give video (none matches what the page asks for). '
    + 'Connect another camera, or use a video or image file below.'],
  NotReadableError: ['busy', 'The camera is busy: another app or tab is using it (or it failed to start). '
    + 'Close that app or tab, then press the camera button again; or use a file below.'],
  AbortError: ['busy', 'The camera could not be started (it may be in use by another app). Close other apps '
    + 'using it, then press the camera button again; or use a file below.'],
};

export function cameraError(err) {
  const [reason, message] = FAILURES[err.name]
    || ['failed', `The camera could not start (${err.name}: ${err.message}). Use a file below.`];
  return new CameraError(reason, message);
}

// Front camera at (up to) 640x480.
export async function openCamera(video, {width = 640, height = 480} = {}) {
  if (!window.isSecureContext || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    throw insecureContextError();
  }
  stopStream(video);   // a second click must not leave the first stream running
  if (video.src) {
    URL.revokeObjectURL(video.src);
    video.removeAttribute('src');
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      audio: false, video: {facingMode: 'user', width: {ideal: width}, height: {ideal: height}},
    });
  } catch (err) {
    throw cameraError(err);
  }
  video.srcObject = stream;
  video.muted = true;
  video.playsInline = true;
  await video.play();
  return stream;
}

export function stopStream(video) {
  const stream = video.srcObject;
  if (stream) stream.getTracks().forEach((t) => t.stop());
  video.srcObject = null;
}

export async function openVideoFile(video, file) {
  stopStream(video);
  if (video.src) URL.revokeObjectURL(video.src);
  video.src = URL.createObjectURL(file);
  video.loop = true;
  video.muted = true;
  await video.play();
}

// A browser gives no frame rate for a file: read it off the timestamps of the frames it
// presents while playing (the shortest gap, since a slow page may drop some), snapped to a
// common rate when within 1%. Leaves the video paused.
const COMMON_RATES = [5, 10, 12, 15, 23.976, 24, 25, 29.97, 30, 48, 50, 59.94, 60];
export async function measureFrameRate(video, {frames = 12, timeoutMs = 5000} = {}) {
  if (!('requestVideoFrameCallback' in HTMLVideoElement.prototype)) return 30;
  video.currentTime = 0;
  const times = await new Promise((resolve) => {
    const seen = [];
    const done = () => resolve(seen);
    const tick = (now, meta) => {
      seen.push(meta.mediaTime);
      if (seen.length >= frames || video.ended) done();
      else video.requestVideoFrameCallback(tick);
    };
    video.requestVideoFrameCallback(tick);
    video.play().catch(done);
    setTimeout(done, timeoutMs);
  });
  video.pause();
  const gaps = times.slice(1).map((t, i) => t - times[i]).filter((g) => g > 1e-4);
  if (!gaps.length) return 30;
  const fps = 1 / Math.min(...gaps);
  const common = COMMON_RATES.find((r) => Math.abs(r - fps) / r < 0.01);
  return common || Math.round(fps * 100) / 100;
}

// A recorded WebM often has no length in its header: seeking past the end makes the browser
// find it. -> seconds; throws when it stays unknown.
export async function videoDuration(video) {
  if (!Number.isFinite(video.duration)) await seekVideo(video, 1e9);
  if (!Number.isFinite(video.duration) || video.duration <= 0) {
    throw new Error('This video has no known length: it plays live, not frame by frame.');
  }
  return video.duration;
}

// Seek a paused video; resolves once the frame at `time` can be drawn. 'seeked' alone is not
// that: Chromium may still draw the frame before it (seen here: one stale frame in two runs
// of a 120-frame WebM), so this also waits until the new frame is presented (rVFC),
// or 250 ms after 'seeked' when the seek landed on the frame already shown (no new frame).
export function seekVideo(video, time) {
  return new Promise((resolve, reject) => {
    const canWatch = 'requestVideoFrameCallback' in video;
    let [seeked, presented, timer] = [false, !canWatch, 0];
    const finish = () => {
      if (!seeked || !presented) return;
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      video.removeEventListener('seeked', onSeeked);
      video.removeEventListener('error', onError);
    };
    const onSeeked = () => {
      seeked = true;
      timer = setTimeout(() => { presented = true; finish(); }, 250);
      finish();
    };
    const onError = () => { cleanup(); reject(new Error('The video could not be read at this point.')); };
    if (canWatch) video.requestVideoFrameCallback(() => { presented = true; finish(); });
    video.addEventListener('seeked', onSeeked);
    video.addEventListener('error', onError);
    video.currentTime = time;
  });
}

// File -> ImageBitmap (EXIF orientation applied); throws a readable Error when undecodable.
export async function decodeImage(file) {
  if (file.type && !file.type.startsWith('image/')) {
    throw new Error(`${file.name} is not an image (${file.type}).`);
  }
  try {
    return await createImageBitmap(file, {imageOrientation: 'from-image'});
  } catch {
    throw new Error(`${file.name || 'The file'} could not be decoded as an image.`);
  }
}

// Files dropped on `zone` or pasted anywhere on the page -> onFiles(File[]).
export function acceptFiles(zone, onFiles, {paste = true} = {}) {
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('dragging');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('dragging'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('dragging');
    const files = Array.from(e.dataTransfer.files || []);
    if (files.length) onFiles(files);
  });
  if (!paste) return;   // one zone of a page takes pastes
  document.addEventListener('paste', (e) => {
    const files = Array.from(e.clipboardData ? e.clipboardData.files : []);
    if (files.length) onFiles(files);
  });
}

// Calls back on every new video frame (requestVideoFrameCallback where there is one).
export function onVideoFrames(video, callback) {
  let active = true;
  if ('requestVideoFrameCallback' in HTMLVideoElement.prototype) {
    const tick = (now, meta) => {
      if (!active) return;
      callback(meta);
      video.requestVideoFrameCallback(tick);
    };
    video.requestVideoFrameCallback(tick);
  } else {
    const tick = () => {
      if (!active) return;
      callback(null);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }
  return () => {
    active = false;
  };
}
