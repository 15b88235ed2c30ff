"""Per-case evidence (P10): every delivered observation, every action chunk, a video.

:class:`CaseEvidence` is an episode listener that streams everything to disk as it
happens, so memory stays flat however long the episode runs:

* ``observations.<camera>.mkv`` (level full): each camera's delivered images,
  losslessly encoded by the ffmpeg binary that imageio-ffmpeg ships, one frame per
  policy call.
* ``observations.jsonl``: one line per policy call with the language, each image's
  sha256 (and, level full, its frame number in its stream), and the proprio vector
  (level full: exact bytes and sha256; replayable: its sha256).
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

Evidence levels (``level``, from ``--libero-evidence``): ``full`` writes all of the
above; ``replayable`` writes no ``.mkv`` streams and no proprio bytes, only the same
sha256 of every image and proprio vector (and their shapes), the exact actions and the
video: enough to re-execute the episode and check every observation, not to read it
back; ``dataset`` writes everything ``full`` does and both cameras' images at every
control (``evidence/controls.py``). The hashes are computed the same way at every
level, so they agree byte for byte. Every level checks every image the same way (uint8
RGB, a usable camera name), so an episode behaves the same whichever level records it.

A crash keeps what was written: the index and action lines are flushed as written,
and Matroska is readable without its closing index. If the test process dies, ffmpeg
sees end of input and finalizes its files itself."""

from __future__ import annotations

import os
import subprocess
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_libero.evidence.controls import ControlFrames, Scene
from pytest_libero.evidence.ffmpeg import (
    LOSSLESS_CODECS,
    VIDEO_ARGS,
    FrameWriter,
    camera_codec,
    ffmpeg_exe,
    ffmpeg_version,
    finish_all,
    kill_all,
)
from pytest_libero.evidence.layout import (
    ACTIONS_NAME,
    CAMERA_NAME,
    DATASET,
    FORMAT,
    FULL,
    INDEX_NAME,
    LEVELS,
    STREAMED,
    VIDEO_NAME,
    EvidenceError,
    encode_array,
    hash_array,
    stream_name,
)
from pytest_libero.files import json_text
from pytest_libero.policy.contract import RAW_REPLY, Observation, Reply
from pytest_libero.protocol.clock import ChunkTiming
from pytest_libero.protocol.hashing import array_sha256, sha256_file
from pytest_libero.protocol.parameters import CONTROL_FREQ_HZ


class CaseEvidence:
    """Episode listener writing one case's evidence into ``folder`` as it happens.

    Use it as a context manager or call :meth:`close` in a ``finally``: close is safe
    after an exception and keeps whatever was written decodable.
    """

    fps = CONTROL_FREQ_HZ
    """The video plays in real time: one frame per control at stride 1."""
    video_camera = "agentview"

    def __init__(self, folder: Path | str, *, video_stride: int = 1, level: str = FULL) -> None:
        if video_stride < 1:
            raise ValueError(f"video_stride must be at least 1, got {video_stride}")
        if level not in LEVELS:
            raise ValueError(f"evidence level must be one of {', '.join(LEVELS)}, got {level!r}")
        self.folder = Path(folder)
        self.video_stride = video_stride
        self.level = level
        self.lossless = level in STREAMED
        """Whether the observations themselves are kept (the streams, proprio bytes)."""
        ffmpeg_exe()
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            # "x": a case folder that already holds evidence is never overwritten.
            self._index: IO[str] = (self.folder / INDEX_NAME).open("x", encoding="utf-8")
            self._actions: IO[str] = (self.folder / ACTIONS_NAME).open("x", encoding="utf-8")
        except FileExistsError as exc:
            raise EvidenceError(f"{self.folder} already holds evidence ({exc.filename})") from None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._finalizer = weakref.finalize(self, finish_all, self._procs)
        self._control_frames = ControlFrames(self.folder, self.fps, self._procs) if level == DATASET else None
        self._streams: dict[str, FrameWriter] = {}
        self._cameras: dict[str, tuple[int, ...]] = {}  # checked once each, at any level
        self._video: FrameWriter | None = None
        self._observations = 0
        self._chunks = 0
        self._controls = 0
        self._pending: dict[int, list[np.ndarray]] = {}  # executed actions of replies not yet told
        self._untold: list[int] = []  # replies decided, not yet told finished (call order)
        self._sent_at: dict[int, int] = {}
        self._first_control: dict[int, int] = {}
        self._summary: dict[str, Any] | None = None
        self._close_error: EvidenceError | None = None

    def __enter__(self) -> CaseEvidence:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def follow(self, scene: Scene) -> None:
        """Level dataset: the episode whose every control's images are kept, handed over
        before its first control (``evidence/controls.py``); other levels keep none."""
        if self._control_frames is not None:
            self._require_open()
            self._control_frames.follow(scene)

    # -- EpisodeListener -------------------------------------------------------------

    def on_observation(self, call: int, observation: Observation) -> None:
        self._require_open()
        images: dict[str, Any] = {}
        for camera in sorted(observation.images):
            image = observation.images[camera]
            self._check_camera(camera, image)
            entry: dict[str, Any] = {
                "sha256": array_sha256(image),
                "shape": list(image.shape),
                "dtype": str(image.dtype),
            }
            if self.lossless:
                entry["frame"] = self._stream(camera, image).write(image)
            images[camera] = entry
            if camera == self.video_camera and self._video is None:
                self._video_write(image)
        proprio = None
        if observation.proprio is not None:
            keep = encode_array if self.lossless else hash_array
            proprio = keep(observation.proprio)
        line = {
            "call": call,
            "policy_calls": observation.policy_calls,
            "executed_controls": observation.executed_controls,
            "language": observation.language,
            "images": images,
            "proprio": proprio,
        }
        self._write_line(self._index, line)
        self._sent_at[call] = observation.executed_controls
        self._observations += 1

    def on_decision(self, call: int, reply: Reply) -> None:
        self._untold.append(call)

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        self._require_open()
        line: dict[str, Any] = {
            "call": call,
            "horizon": reply.horizon,
            "executed": timing.executed,
            "stop": reply.stop,
            "actions": None if reply.actions is None else encode_array(reply.actions),
            "extras": sorted(map(str, reply.extras)),
            "complete": True,
            "sent_at_control": timing.sent_at,
            "usable_at_control": timing.usable_at,
            "delay_controls": timing.delay,
            "first_executed_index": timing.first_executed,
        }
        raw = reply.extras.get(RAW_REPLY)
        if isinstance(raw, Mapping):
            line["raw_reply"] = {str(k): _exact(v) for k, v in raw.items()}
        self._untold.remove(call)
        pending = self._pending.pop(call, [])
        if reply.actions is not None and pending:
            ran = np.stack(pending)
            first = timing.first_executed or 0
            if not np.array_equal(ran, reply.actions[first:first + timing.executed]):
                line["executed_actions"] = encode_array(ran)  # clipped before execution
        self._write_line(self._actions, line)
        self._chunks += 1

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        self._require_open()
        if call is not None:
            self._first_control.setdefault(call, control - 1)
            self._pending.setdefault(call, []).append(np.array(action, dtype=np.float64))
        self._controls = control
        if control % self.video_stride == 0:
            self._video_write(frame())
        if self._control_frames is not None:
            self._control_frames.take(control)

    # -- closing ---------------------------------------------------------------------

    def close(self, also: Sequence[str] = ()) -> dict[str, Any]:
        """Finish every file and return the case's evidence summary (JSON-ready).

        ``also`` names files others wrote into the case folder (the safety signals):
        those present are hashed with the rest, so verify checks every evidence file.
        Raises EvidenceError, after finishing everything else, when a stream failed;
        the error carries the summary of what was kept.
        """
        if self._summary is not None:
            if self._close_error is not None:
                raise self._close_error
            return self._summary
        try:
            for call in self._untold:
                if self._actions.closed:
                    break
                # The episode ended while the reply could still run (an error mid-chunk):
                # keep what ran of it, and when.
                ran = self._pending.get(call, [])
                sent = self._sent_at.get(call)
                first = self._first_control.get(call)
                self._write_line(self._actions, {
                    "call": call, "horizon": None, "executed": len(ran), "stop": None,
                    "actions": encode_array(np.stack(ran)) if ran else None, "extras": [],
                    "complete": False, "sent_at_control": sent,
                    "first_executed_index": None if first is None or sent is None else first - sent,
                })
            self._untold.clear()
            self._pending.clear()
            for handle in (self._index, self._actions):
                if not handle.closed:
                    handle.flush()
                    os.fsync(handle.fileno())
                    handle.close()
            if self._control_frames is not None:
                self._control_frames.close()
        finally:
            errors = [e for w in self._writers() if (e := w.close()) is not None]
            kill_all(self._procs)
        self._finalizer.detach()
        self._summary = self._describe(errors, also)
        if errors:
            self._close_error = EvidenceError("\n".join(errors), self._summary)
            raise self._close_error
        return self._summary

    def _describe(self, errors: list[str], also: Sequence[str] = ()) -> dict[str, Any]:
        names = [INDEX_NAME, ACTIONS_NAME, *(stream_name(c) for c in self._streams), *also,
                 *(self._control_frames.files() if self._control_frames is not None else ())]
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
            "level": self.level,
            "ffmpeg": ffmpeg_version(),
            "observations": {
                "index": INDEX_NAME,
                "count": self._observations,
                "streams": {
                    camera: {
                        "path": stream_name(camera), "codec": camera_codec(camera),
                        "frames": w.frames, "shape": list(w.shape),
                    }
                    for camera, w in sorted(self._streams.items())
                },
            },
            "actions": {"path": ACTIONS_NAME, "replies": self._chunks, "executed_controls": self._controls},
            **({"controls": self._control_frames.describe()} if self._control_frames is not None else {}),
            "video": video,
            "files": files,
            "errors": errors,
        }

    # -- helpers ---------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._summary is not None:
            raise EvidenceError(f"{self.folder}: evidence is already closed")

    def _writers(self) -> list[FrameWriter]:
        writers = list(self._streams.values())
        if self._control_frames is not None:
            writers += self._control_frames.writers()
        return writers + ([self._video] if self._video is not None else [])

    def _check_camera(self, camera: str, image: np.ndarray) -> None:
        """A camera's first image: a name that can name its stream, uint8 RGB."""
        if camera in self._cameras:
            return
        if not CAMERA_NAME.match(camera):
            raise EvidenceError(f"camera name {camera!r} cannot name a file")
        _check_rgb(image, f"observation image {camera!r}")
        self._cameras[camera] = tuple(image.shape)

    def _stream(self, camera: str, image: np.ndarray) -> FrameWriter:
        stream = self._streams.get(camera)
        if stream is not None:
            return stream
        name = stream_name(camera)
        stream = FrameWriter(self.folder / name, image.shape,
                              LOSSLESS_CODECS[camera_codec(camera)], self.fps, self._procs)
        self._streams[camera] = stream
        return stream

    def _video_write(self, image: np.ndarray) -> None:
        if self._video is None:
            _check_rgb(image, "video frame")
            args = list(VIDEO_ARGS)
            if image.shape[0] % 2 or image.shape[1] % 2:  # yuv420p needs even sides
                args[:0] = ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"]
            self._video = FrameWriter(self.folder / VIDEO_NAME, image.shape, args, self.fps,
                                       self._procs)
        self._video.write(image)

    @staticmethod
    def _write_line(handle: IO[str], record: Mapping[str, Any]) -> None:
        handle.write(json_text(record, separators=(",", ":")) + "\n")
        handle.flush()


def _exact(value: Any) -> Any:
    """A raw reply value as the case folder keeps it: numbers exactly, the rest as text."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.dtype.kind in "biuf":
        return encode_array(array)
    return repr(value)


def _check_rgb(image: np.ndarray, what: str) -> None:
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise EvidenceError(
            f"{what} is {image.dtype}{list(image.shape)}; only uint8 (H, W, 3) RGB is stored"
        )
