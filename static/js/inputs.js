// Where frames come from: the camera, a video file, an image file (picker, drag-and-drop, paste).

export class CameraError extends Error {}

// Front camera at (up to) 640x480. Clear messages for denied / missing / busy cameras.
export async function openCamera(video, {width = 640, height = 480} = {}) {
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    throw new CameraError('This browser has no camera API (a secure context — https or localhost — is needed).');
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
    const messages = {
      NotAllowedError: 'Camera access was denied. Allow it in the address bar, or use a file below.',
      NotFoundError: 'No camera was found. Use a video or image file below.',
      NotReadableError: 'The camera is busy in another application. Close it, or use a file below.',
      OverconstrainedError: 'The camera cannot provide a usable resolution. Use a file below.',
    };
    throw new CameraError(messages[err.name] || `The camera could not start (${err.name}). Use a file below.`);
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

// File -> ImageBitmap (EXIF orientation applied); throws a readable Error when undecodable.
export async function decodeImage(file) {
  if (file.type && !file.type.startsWith('image/')) {
    throw new Error(`${file.name} is not an image (${file.type}).`);
  }
  try {
    return await createImageBitmap(file, {imageOrientation: 'from-image'});
  } catch (err) {
    throw new Error(`${file.name || 'The file'} could not be decoded as an image.`);
  }
}

// Files dropped on `zone` or pasted anywhere on the page -> onFiles(File[]).
export function acceptFiles(zone, onFiles) {
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
