"""Per-case evidence (P10): every delivered observation, every action chunk, a video.

:class:`CaseEvidence` is an episode listener that streams everything to disk as it
happens, so memory stays flat however long the episode runs:

* ``observations.<camera>.mkv``: each camera's delivered images, losslessly encoded by
  the ffmpeg binary that imageio-ffmpeg ships, one frame per policy call.
* ``observations.jsonl``: one line per policy call with the language, each image's
  sha256 and frame number in its stream, and the proprio vector (exact bytes).
* ``actions.jsonl``: one line per reply: the full chunk as exact float64 bytes, how
  many of its actions executed, and the stop flag.
* ``episode.mp4``: H.264/yuv420p video for people (browsers play it): the first
  observation's agentview image, then one frame per ``video_stride`` controls.

Codec choice, measured on a real libero_object episode (256x256, one ffmpeg thread,
observations every 1 or 5 controls): FFV1 stores the moving wrist camera in ~30 KiB a
frame against 50-60 KiB for lossless H.264, while lossless H.264 (libx264rgb, qp 0)
stores the mostly static agentview camera in 13-21 KiB against ~52 KiB for FFV1,
because it predicts from earlier frames. Both decode bit-exactly; the mix is 33-47%
smaller than either codec alone (43-51 KiB per observation, raw is 384 KiB).
:func:`read_observations` decodes either and checks every frame against its hash.

A crash keeps what was written: the index and action lines are flushed as written,
and Matroska is readable without its closing index. If the test process dies, ffmpeg
sees end of input and finalizes its files itself.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_libero.errors import EpisodeError
from pytest_libero.identity import array_sha256, sha256_file
from pytest_libero.policy.contract import Observation, Reply

FORMAT = "pytest-libero-case-evidence/1"
INDEX_NAME = "observations.jsonl"
ACTIONS_NAME = "actions.jsonl"
VIDEO_NAME = "episode.mp4"

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

VIDEO_ARGS = [
    "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p",
    # Convert with the BT.709 matrix and say so in the stream, as browsers assume.
    "-colorspace", "bt709", "-x264-params", "colorprim=bt709:transfer=bt709:colormatrix=bt709",
    "-movflags", "+faststart",
]

_CAMERA_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_CLOSE_TIMEOUT_S = 120.0


class EvidenceError(EpisodeError):
    """Evidence could not be written or read back; it names the file and the cause.

    ``summary`` holds what close() could still account for, when it raised.
    """

    kind = "evidence"
    cause = "evidence"

    def __init__(self, message: str, summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.summary = summary


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


def stream_name(camera: str) -> str:
    """File name of a camera's lossless stream inside the case folder."""
    return f"observations.{camera}.mkv"


def _tail(log: IO[bytes], limit: int = 2000) -> str:
    log.flush()
    log.seek(0)
    text = log.read().decode("utf-8", errors="replace").strip()
    return text[-limit:] if text else "(ffmpeg wrote nothing to stderr)"


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Stop an ffmpeg child for good: no orphan, no zombie."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()


class _FrameWriter:
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
        self._proc: subprocess.Popen[bytes] = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._log
        )
        reaper.append(self._proc)

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
            f"stderr tail:\n{_tail(self._log)}"
        )
        self._log.close()


def _kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        _reap(proc)
    procs.clear()


def _finish_all(procs: list[subprocess.Popen[bytes]]) -> None:
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


def _encode_array(array: np.ndarray) -> dict[str, Any]:
    """Exact, self-describing JSON form of an array: dtype, shape, base64 bytes."""
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "base64": base64.b64encode(contiguous.tobytes()).decode("ascii"),
        "sha256": array_sha256(contiguous),
    }


def decode_array(record: Mapping[str, Any]) -> np.ndarray:
    """Inverse of the JSON array form; the bytes come back exactly."""
    raw = base64.b64decode(record["base64"])
    return np.frombuffer(raw, dtype=np.dtype(record["dtype"])).reshape(record["shape"]).copy()


class CaseEvidence:
    """Episode listener writing one case's evidence into ``folder`` as it happens.

    Use it as a context manager or call :meth:`close` in a ``finally``: close is safe
    after an exception and keeps whatever was written decodable.
    """

    def __init__(
        self,
        folder: Path | str,
        *,
        video_stride: int = 1,
        fps: int = 20,
        video_camera: str = "agentview",
        camera_codecs: Mapping[str, str] | None = None,
    ) -> None:
        if video_stride < 1:
            raise ValueError(f"video_stride must be at least 1, got {video_stride}")
        if fps < 1:
            raise ValueError(f"fps must be at least 1, got {fps}")
        self.folder = Path(folder)
        self.video_stride = video_stride
        self.fps = fps
        self.video_camera = video_camera
        self._codecs = dict(CAMERA_CODECS if camera_codecs is None else camera_codecs)
        for codec in self._codecs.values():
            if codec not in LOSSLESS_CODECS:
                raise ValueError(f"unknown lossless codec {codec!r}; known: {sorted(LOSSLESS_CODECS)}")
        ffmpeg_exe()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            # "x": a case folder that already holds evidence is never overwritten.
            self._index: IO[str] = (self.folder / INDEX_NAME).open("x", encoding="utf-8")
            self._actions: IO[str] = (self.folder / ACTIONS_NAME).open("x", encoding="utf-8")
        except FileExistsError as exc:
            raise EvidenceError(f"{self.folder} already holds evidence ({exc.filename})") from None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._finalizer = weakref.finalize(self, _finish_all, self._procs)
        self._streams: dict[str, _FrameWriter] = {}
        self._video: _FrameWriter | None = None
        self._observations = 0
        self._chunks = 0
        self._controls = 0
        self._last_call: int | None = None
        self._pending: list[np.ndarray] = []  # controls of the current chunk, at most K
        self._summary: dict[str, Any] | None = None
        self._close_error: EvidenceError | None = None

    def __enter__(self) -> CaseEvidence:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- EpisodeListener -------------------------------------------------------------

    def on_observation(self, call: int, observation: Observation) -> None:
        self._require_open()
        images: dict[str, Any] = {}
        for camera in sorted(observation.images):
            image = observation.images[camera]
            stream = self._stream(camera, image)
            images[camera] = {
                "frame": stream.write(image),
                "sha256": array_sha256(image),
                "shape": list(image.shape),
                "dtype": str(image.dtype),
            }
            if camera == self.video_camera and self._video is None:
                self._video_write(image)
        proprio = None if observation.proprio is None else _encode_array(observation.proprio)
        line = {
            "call": call,
            "policy_calls": observation.policy_calls,
            "executed_controls": observation.executed_controls,
            "language": observation.language,
            "images": images,
            "proprio": proprio,
        }
        self._write_line(self._index, line)
        self._observations += 1
        self._last_call = call

    def on_decision(self, call: int, reply: Reply) -> None:
        pass

    def on_reply(self, call: int, reply: Reply, executed: int) -> None:
        self._require_open()
        line: dict[str, Any] = {
            "call": call,
            "horizon": reply.horizon,
            "executed": executed,
            "stop": reply.stop,
            "actions": None if reply.actions is None else _encode_array(reply.actions),
            "extras": sorted(map(str, reply.extras)),
            "complete": True,
        }
        if reply.actions is not None and self._pending:
            ran = np.stack(self._pending)
            if not np.array_equal(ran, reply.actions[:executed]):
                line["executed_actions"] = _encode_array(ran)  # clipped before execution
        self._write_line(self._actions, line)
        self._chunks += 1
        self._pending.clear()

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
        self._require_open()
        self._pending.append(np.array(action, dtype=np.float64))
        self._controls = control
        if control % self.video_stride == 0:
            self._video_write(frame())

    # -- closing ---------------------------------------------------------------------

    def close(self) -> dict[str, Any]:
        """Finish every file and return the case's evidence summary (JSON-ready).

        Raises EvidenceError, after finishing everything else, when a stream failed;
        the error carries the summary of what was kept.
        """
        if self._summary is not None:
            if self._close_error is not None:
                raise self._close_error
            return self._summary
        try:
            if self._pending and not self._actions.closed:
                # The episode ended inside a chunk (an error mid-chunk): keep what ran.
                executed = np.stack(self._pending)
                self._write_line(self._actions, {
                    "call": self._last_call, "horizon": None, "executed": len(executed),
                    "stop": None, "actions": _encode_array(executed), "extras": [],
                    "complete": False,
                })
                self._pending.clear()
            for handle in (self._index, self._actions):
                if not handle.closed:
                    handle.flush()
                    os.fsync(handle.fileno())
                    handle.close()
        finally:
            errors = [e for w in self._writers() if (e := w.close()) is not None]
            _kill_all(self._procs)
        self._finalizer.detach()
        self._summary = self._describe(errors)
        if errors:
            self._close_error = EvidenceError("\n".join(errors), self._summary)
            raise self._close_error
        return self._summary

    def _describe(self, errors: list[str]) -> dict[str, Any]:
        names = [INDEX_NAME, ACTIONS_NAME, *(stream_name(c) for c in self._streams)]
        files = {}
        for name in sorted(names + ([VIDEO_NAME] if self._video is not None else [])):
            path = self.folder / name
            if path.is_file():
                files[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        video = None
        if self._video is not None:
            video = {
                "path": VIDEO_NAME, "frames": self._video.frames, "fps": self.fps,
                "stride": self.video_stride, "camera": self.video_camera,
                "codec": "h264", "pix_fmt": "yuv420p",
            }
        return {
            "format": FORMAT,
            "ffmpeg": ffmpeg_version(),
            "observations": {
                "index": INDEX_NAME,
                "count": self._observations,
                "streams": {
                    camera: {
                        "path": stream_name(camera), "codec": self._codec(camera),
                        "frames": w.frames, "shape": list(w.shape),
                    }
                    for camera, w in sorted(self._streams.items())
                },
            },
            "actions": {"path": ACTIONS_NAME, "replies": self._chunks, "executed_controls": self._controls},
            "video": video,
            "files": files,
            "errors": errors,
        }

    # -- helpers ---------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._summary is not None:
            raise EvidenceError(f"{self.folder}: evidence is already closed")

    def _writers(self) -> list[_FrameWriter]:
        writers = list(self._streams.values())
        return writers + ([self._video] if self._video is not None else [])

    def _codec(self, camera: str) -> str:
        return self._codecs.get(camera, DEFAULT_CODEC)

    def _stream(self, camera: str, image: np.ndarray) -> _FrameWriter:
        stream = self._streams.get(camera)
        if stream is not None:
            return stream
        if not _CAMERA_NAME.match(camera):
            raise EvidenceError(f"camera name {camera!r} cannot name a file")
        _check_rgb(image, f"observation image {camera!r}")
        name = stream_name(camera)
        stream = _FrameWriter(self.folder / name, image.shape,
                              LOSSLESS_CODECS[self._codec(camera)], self.fps, self._procs)
        self._streams[camera] = stream
        return stream

    def _video_write(self, image: np.ndarray) -> None:
        if self._video is None:
            _check_rgb(image, "video frame")
            args = list(VIDEO_ARGS)
            if image.shape[0] % 2 or image.shape[1] % 2:  # yuv420p needs even sides
                args[:0] = ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"]
            self._video = _FrameWriter(self.folder / VIDEO_NAME, image.shape, args, self.fps,
                                       self._procs)
        self._video.write(image)

    @staticmethod
    def _write_line(handle: IO[str], record: Mapping[str, Any]) -> None:
        handle.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
        handle.flush()


def _check_rgb(image: np.ndarray, what: str) -> None:
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise EvidenceError(
            f"{what} is {image.dtype}{list(image.shape)}; only uint8 (H, W, 3) RGB is stored"
        )


# -- reading back ----------------------------------------------------------------------


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """JSON lines, ignoring a last line cut short by a crash."""
    with path.open("r", encoding="utf-8") as stream:
        for line in stream:
            if not line.endswith("\n"):
                return
            yield json.loads(line)


class _FrameReader:
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
                    f"index lists frame {number}; ffmpeg stderr tail:\n{_tail(self._log)}"
                )
            self.position += 1
            if self.position - 1 == number:
                return np.frombuffer(data, np.uint8).reshape(self.shape).copy()

    def close(self) -> None:
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        _reap(self._proc)
        self._log.close()


def read_observations(
    case_dir: Path | str, *, verify: bool = True
) -> Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]]:
    """Yield (call, {camera: image}, proprio) for every stored observation, decoded.

    With ``verify`` each decoded image and proprio vector is checked against the sha256
    recorded when it was delivered; a mismatch raises EvidenceError naming the frame.
    """
    folder = Path(case_dir)
    readers: dict[str, _FrameReader] = {}
    try:
        for line in _read_lines(folder / INDEX_NAME):
            images: dict[str, np.ndarray] = {}
            for camera, entry in sorted(line["images"].items()):
                reader = readers.get(camera)
                if reader is None:
                    reader = _FrameReader(folder / stream_name(camera), tuple(entry["shape"]))
                    readers[camera] = reader
                image = reader.frame(int(entry["frame"]))
                if verify and array_sha256(image) != entry["sha256"]:
                    raise EvidenceError(
                        f"{stream_name(camera)}: frame {entry['frame']} (call {line['call']}) "
                        f"decodes to sha256 {array_sha256(image)}, recorded {entry['sha256']}"
                    )
                images[camera] = image
            proprio = None if line["proprio"] is None else decode_array(line["proprio"])
            if verify and proprio is not None and array_sha256(proprio) != line["proprio"]["sha256"]:
                raise EvidenceError(f"{INDEX_NAME}: proprio of call {line['call']} does not match its hash")
            yield int(line["call"]), images, proprio
    finally:
        for reader in readers.values():
            reader.close()


@dataclass(frozen=True)
class ChunkRecord:
    """One reply as stored: the full chunk, how much of it ran, and the stop flag.

    ``complete`` is False for a chunk cut short by an error before the reply was
    recorded; then ``actions`` holds only the controls that executed, and ``stop``
    and ``horizon`` are unknown. ``clipped`` holds the prefix as it executed when it
    differed from the chunk as sent (out_of_bounds = "clip").
    """

    call: int | None
    actions: np.ndarray | None
    horizon: int | None
    executed: int
    stop: bool | None
    complete: bool
    clipped: np.ndarray | None = None

    @property
    def executed_actions(self) -> np.ndarray | None:
        """What the simulator ran: the clipped prefix, or the chunk's first actions."""
        if self.clipped is not None:
            return self.clipped
        return None if self.actions is None else self.actions[: self.executed]


def read_actions(case_dir: Path | str) -> Iterator[ChunkRecord]:
    """Yield every stored reply, with float64 chunks exactly as the policy sent them."""
    for line in _read_lines(Path(case_dir) / ACTIONS_NAME):
        actions = None if line["actions"] is None else decode_array(line["actions"])
        if actions is not None and array_sha256(actions) != line["actions"]["sha256"]:
            raise EvidenceError(f"{ACTIONS_NAME}: chunk of call {line['call']} does not match its hash")
        ran = None
        if (clipped := line.get("executed_actions")) is not None:
            ran = decode_array(clipped)
            if array_sha256(ran) != clipped["sha256"]:
                raise EvidenceError(f"{ACTIONS_NAME}: executed prefix of call {line['call']} "
                                    "does not match its hash")
        yield ChunkRecord(line["call"], actions, line["horizon"], line["executed"],
                          line["stop"], line["complete"], ran)
