"""The baseline: the same work as configs/file.toml in one thread, one frame at a time.

Decode (PyAV), letterbox (OpenCV/numpy), infer (ONNX Runtime), decode head + NMS (numpy),
draw (OpenCV), encode (PyAV libx264, same settings), JSON lines. The same library calls the
pipeline's stages make, with nothing overlapped.
"""

from __future__ import annotations

import json
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import onnxruntime as ort

from vapipe.pipeline.assets import resolve_media, resolve_model
from vapipe.pipeline.stage import StageContext
from vapipe.stages.events.records import iso_time
from vapipe.stages.infer.heads import Family, decode
from vapipe.stages.media.draw import draw_detections
from vapipe.stages.nms import NmsConfig, NmsStage
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage


def run(
    uri: str, model: str, out_dir: Path, max_frames: int | None = None, spinning: bool = True
) -> dict[str, float]:
    """``spinning=False`` gives ONNX Runtime the same session option the pipeline uses."""
    started = time.perf_counter()
    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(
        str(resolve_model(model)), options, providers=["CPUExecutionProvider"]
    )
    input_name = session.get_inputs()[0].name
    pre = PreprocessStage(
        "pre", PreprocessConfig(input_size=[416, 416], placement="top-left", color="bgr", scale=1.0)
    )
    pre.open(StageContext("pre"))
    nms = NmsStage("nms", NmsConfig(conf=0.3, iou=0.45))

    source = av.open(resolve_media(uri))
    video = source.streams.video[0]
    video.thread_type = "AUTO"
    rate = Fraction(video.average_rate)
    out_dir.mkdir(parents=True, exist_ok=True)
    sink = av.open(str(out_dir / "naive.mp4"), mode="w")
    stream = sink.add_stream("libx264", rate=rate)
    stream.width, stream.height = video.codec_context.width, video.codec_context.height
    stream.pix_fmt = "yuv420p"
    stream.time_base = 1 / rate
    stream.options = {"preset": "veryfast", "crf": "23"}
    events = open(out_dir / "naive.jsonl", "w", encoding="utf-8")  # noqa: SIM115

    frames = 0
    for picture in source.decode(video):
        image = picture.to_ndarray(format="bgr24")
        tensor, box = pre.tensor(image)
        output = session.run(None, {input_name: tensor[None]})[0]
        (found,) = decode(Family.YOLOX, output, 416, 416)
        detections = nms.select(found, box)
        annotated = draw_detections(image, detections)
        out_frame = av.VideoFrame.from_ndarray(annotated, format="bgr24")
        out_frame.pts = frames
        out_frame.time_base = 1 / rate
        for packet in stream.encode(out_frame):
            sink.mux(packet)
        events.write(
            json.dumps(
                {
                    "event": "frame",
                    "source_id": "cam",
                    "seq": frames,
                    "pts": float(picture.pts * picture.time_base),
                    "time": iso_time(time.time()),
                    "detections": detections.to_records(),
                }
            )
            + "\n"
        )
        events.flush()
        frames += 1
        if max_frames and frames >= max_frames:
            break
    for packet in stream.encode(None):
        sink.mux(packet)
    sink.close()
    source.close()
    events.close()
    wall = time.perf_counter() - started
    return {"frames": frames, "wall_s": wall, "fps": frames / wall}


if __name__ == "__main__":
    print(run(sys.argv[1] if len(sys.argv) > 1 else "sample:people", "yolox-nano", Path("out")))
