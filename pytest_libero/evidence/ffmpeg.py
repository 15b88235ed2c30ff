"""The ffmpeg processes behind the case folder: lossless streams in, frames back out.

The binary is the one imageio-ffmpeg ships. Writers take raw RGB frames on stdin;
readers decode a stream back to the exact frames. A process that fails keeps the tail
of its stderr for the error message.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Mapping
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import IO

import numpy as np

from pytest_libero.evidence.layout import EvidenceError
from pytest_libero.files import tail

# Lossless encoders for observation streams; each must round-trip rgb24 exactly.
LOSSLESS_CODECS: dict[str, list[str]] = {
    # Intra-only, range coder, CRC per slice: best on the moving wrist camera.
    "ffv1": [
        "-c:v", "ffv1", "-level", "3", "-coder", "1", "-context", "0", "-g", "1",
        "-slices", "4", "-slicecrc", "1", "-pix_fmt", "gbrp",
    ],
    # Lossless H.264 in RGB: predicts from earlier frames, best on a static camera.
    "x264rgb": ["-c:v", "libx264rgb", "-qp", "0", "-preset", "veryfast", "-pix_fmt", "rgb24"],
}
DEFAULT_CODEC = "ffv1"
CAMERA_CODECS: Mapping[str, str] = {"agentview": "x264rgb"}


def camera_codec(camera: str) -> str:
    """The lossless codec a camera's streams use (its own, else the default)."""
    return CAMERA_CODECS.get(camera, DEFAULT_CODEC)

VIDEO_ARGS = [
    "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p",
    # Convert with the BT.709 matrix and say so in the stream, as browsers assume.
    "-colorspace", "bt709", "-x264-params", "colorprim=bt709:transfer=bt709:colormatrix=bt709",
    "-movflags", "+faststart",
]
_CLOSE_TIMEOUT_S = 120.0
ENCODER_NICENESS = 10
"""How much lower than the case's own the encoders' CPU priority is: the simulator's
renders and physics come first, encoding takes the cycles they leave (bench/throughput.py)."""
PIPE_BYTES = 1 << 20
"""Each encoder's input pipe: 5 frames of 256x256 RGB, so a frame is handed over without
waiting while the lower-priority encoder catches up (Linux's default pipe-max-size)."""


@cache
def ffmpeg_exe() -> str:
    """The ffmpeg binary imageio-ffmpeg ships (or ``IMAGEIO_FFMPEG_EXE``)."""
    try:
        import imageio_ffmpeg  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EvidenceError(
            "episode evidence needs ffmpeg: pip install imageio-ffmpeg"
        ) from exc
    return str(imageio_ffmpeg.get_ffmpeg_exe())


@cache
def ffmpeg_version() -> str:
    """First line of ``ffmpeg -version``: which encoder wrote the evidence."""
    done = subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-version"], capture_output=True, text=True, check=False
    )
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def _stderr_tail(log: IO[bytes]) -> str:
    """The end of an ffmpeg child's stderr, kept in a temporary file."""
    log.flush()
    log.seek(0)
    return tail(log.read().decode("utf-8", errors="replace"), 20, "(ffmpeg wrote nothing to stderr)")


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Stop an ffmpeg child for good: no orphan, no zombie."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class FrameWriter:
    """One ffmpeg process fed raw rgb24 frames on stdin, stderr kept in a temp file.

    stderr goes to a file, not a pipe, so a chatty ffmpeg can never block the writer.
    """

    def __init__(self, path: Path, shape: tuple[int, ...], codec_args: list[str], fps: int,
                 reaper: list[subprocess.Popen[bytes]]) -> None:
        height, width = shape[0], shape[1]
        self.path = path
        self.shape = shape
        self.frames = 0
        self.error: str | None = None
        self._log = tempfile.TemporaryFile()
        command = [
            ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-n",
            "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}",
            "-framerate", str(fps), "-i", "pipe:0",
            *codec_args, "-threads", "1", str(path),
        ]
        # A process group of its own: a signal sent to the run's group (a CI script's
        # background job whose pytest ignores SIGINT) is the run's to act on, never the
        # encoder's alone, which would spoil the case's evidence and error it. A run that
        # does stop kills its case process, and the encoder, reading EOF, ends.
        self._proc: subprocess.Popen[bytes] = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log,
            process_group=0,
        )
        reaper.append(self._proc)
        _yield_to_simulator(self._proc)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def write(self, image: np.ndarray) -> int:
        """Hand one frame to ffmpeg and return its frame number in the stream."""
        if self.error is not None:
            raise EvidenceError(self.error)
        if image.shape != self.shape or image.dtype != np.uint8:
            raise EvidenceError(
                f"{self.path}: frame {self.frames} is {image.dtype}{list(image.shape)}, "
                f"but the stream holds uint8{list(self.shape)}"
            )
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(np.ascontiguousarray(image).data)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            self._fail(f"writing frame {self.frames} failed ({type(exc).__name__})")
            raise EvidenceError(str(self.error)) from exc
        self.frames += 1
        return self.frames - 1

    def close(self) -> str | None:
        """Finish the file; return None, or the error that spoiled it."""
        if self.error is not None:
            return self.error
        stdin = self._proc.stdin
        try:
            if stdin is not None:
                stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            code = self._proc.wait(timeout=_CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._fail(f"ffmpeg did not finish within {_CLOSE_TIMEOUT_S:g} s")
            return self.error
        if code != 0:
            self._fail("finishing the file failed")
        else:
            self._log.close()
        return self.error

    def _fail(self, what: str) -> None:
        _reap(self._proc)
        self.error = (
            f"{self.path}: {what}; ffmpeg exit status {self._proc.returncode}; "
            f"stderr tail:\n{_stderr_tail(self._log)}"
        )
        self._log.close()


def _yield_to_simulator(proc: subprocess.Popen[bytes]) -> None:
    """Lower the encoder's priority and widen its input pipe; where the system refuses
    either (another OS, a capped pipe size), the encoder simply runs as it is."""
    with suppress(OSError):
        own = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, proc.pid, min(19, own + ENCODER_NICENESS))
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if proc.stdin is not None and set_size is not None:
        with suppress(OSError):
            fcntl.fcntl(proc.stdin.fileno(), set_size, PIPE_BYTES)


def kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        _reap(proc)
    procs.clear()


def finish_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Last resort for evidence never closed: end input so ffmpeg still finalizes."""
    for proc in procs:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        _reap(proc)
    procs.clear()


class FrameReader:
    """Decodes one stream to raw rgb24 frames, in order, on demand."""

    def __init__(self, path: Path, shape: tuple[int, ...]) -> None:
        if not path.is_file():
            raise EvidenceError(f"{path.name}: the index names this stream but the file is missing")
        self.path = path
        self.shape = shape
        self.position = 0
        self._log = tempfile.TemporaryFile()
        self._proc: subprocess.Popen[bytes] = subprocess.Popen(
            [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-i", str(path),
             "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log,
        )

    def frame(self, number: int) -> np.ndarray:
        if number < self.position:
            raise EvidenceError(f"{self.path.name}: frame {number} requested after {self.position - 1}")
        stdout = self._proc.stdout
        assert stdout is not None
        size = int(np.prod(self.shape))
        while True:
            data = stdout.read(size)
            if len(data) < size:
                raise EvidenceError(
                    f"{self.path.name}: the stream ends after {self.position} frames but the "
                    f"index lists frame {number}; ffmpeg stderr tail:\n{_stderr_tail(self._log)}"
                )
            self.position += 1
            if self.position - 1 == number:
                return np.frombuffer(data, np.uint8).reshape(self.shape).copy()

    def close(self) -> None:
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        _reap(self._proc)
        self._log.close()
