"""MP4 movies of a panel's live view (imageio with imageio-ffmpeg's ffmpeg), streamed into a
temporary file while a run records and copied atomically where the user wants it."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def movie_support() -> str | None:
    """None when MP4 can be written here, else why not."""
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg
        imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:  # noqa: BLE001  (ImportError, or no ffmpeg binary for this platform)
        return f"movies need imageio and imageio-ffmpeg (pip install imageio imageio-ffmpeg): {exc}"
    return None


class MovieRecorder:
    """Rendered frames of the 3D view streamed into an MP4 in a temporary file while a run
    records; :meth:`finish` closes it (the run ended), :meth:`save` copies it atomically to
    the chosen path. Every frame is padded or cropped to the first frame's (even) size."""

    def __init__(self, fps: float = 15.0):
        self.fps = fps
        self.frames = 0
        self._writer = None
        self._tmp: Path | None = None
        self._shape: tuple[int, int] | None = None
        self.finished = False

    def add(self, rgba: np.ndarray) -> bool:
        """Append one rendered image (H, W, 3 or 4 uint8); False after :meth:`finish`."""
        if self.finished:
            return False
        image = np.asarray(rgba)[..., :3]
        if self._writer is None:
            import imageio
            h, w = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
            if h < 2 or w < 2:
                return False
            fd, name = tempfile.mkstemp(prefix="biogpu-movie-", suffix=".mp4")
            os.close(fd)
            self._tmp, self._shape = Path(name), (h, w)
            self._writer = imageio.get_writer(name, format="FFMPEG", mode="I", fps=self.fps, codec="libx264",
                                              pixelformat="yuv420p", quality=7, macro_block_size=2)
        h, w = self._shape
        if image.shape[:2] != (h, w):
            padded = np.zeros((h, w, 3), np.uint8)
            hh, ww = min(h, image.shape[0]), min(w, image.shape[1])
            padded[:hh, :ww] = image[:hh, :ww]
            image = padded
        self._writer.append_data(np.ascontiguousarray(image, np.uint8))
        self.frames += 1
        return True

    def finish(self) -> Path | None:
        """Close the movie (no more frames); returns its temporary file, None without frames."""
        self.finished = True
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()
        return self._tmp if self.frames else None

    def save(self, path: str | Path) -> Path:
        """Finish and write the movie to ``path`` (temporary file in its folder, then rename)."""
        tmp = self.finish()
        if tmp is None:
            raise RuntimeError("no movie recorded: tick 'record movie' before running")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            shutil.copyfile(tmp, part)
            os.replace(part, path)
        except BaseException:
            Path(part).unlink(missing_ok=True)
            raise
        log.info("movie: %d frames at %g fps in %s", self.frames, self.fps, path)
        return path

    def discard(self) -> None:
        self.finish()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        self.frames = 0
