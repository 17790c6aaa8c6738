"""The ``plates`` node's keys: which objects (or the whole frame), the two models, how a read
becomes a vote, what a plate looks like, and the known plates."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from vapipe.stages.objects.config import InputConfig, ObjectModelConfig
from vapipe.stages.plates import ocr
from vapipe.stages.plates.ocr import RAPIDOCR
from vapipe.stages.plates.text import PlateShape

VEHICLES = ["car", "truck", "bus", "motorcycle"]


def _det_input() -> InputConfig:
    # PP-OCR's detector: BGR, (x / 255 - 0.5) / 0.5.
    return InputConfig(color="bgr", scale=1 / 255, mean=[0.5] * 3, std=[0.5] * 3)


class PlatesConfig(ObjectModelConfig):
    """Text found inside each tracked vehicle (PP-OCR's text detector on the vehicle's crop),
    each region read (its recogniser), the plate-shaped reads voted per track character by
    character; the plate that holds written into the object's attributes and a ``plate``
    event on the frame where it first holds."""

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data.setdefault("model", RAPIDOCR)
        return data

    model: str = RAPIDOCR
    """The text detector (a PP-OCR DB model, ONNX); ``rapidocr``: the one in the installed
    ``rapidocr`` package (``pip install 'vapipe[ocr]'``)."""
    rec_model: str = RAPIDOCR
    """The text recogniser (a PP-OCR CTC model, ONNX, input height 48); ``rapidocr``: the
    installed package's."""
    characters: str | None = None
    """A file of the recogniser's characters, one a line; default: the model's
    ``character`` metadata (PP-OCR exports carry it)."""
    rec_width: int = Field(320, ge=48, le=2048)
    """The recogniser's input width: a text line is cut at height 48 and padded to this
    (320 holds an aspect of 6.7, a one-line plate's)."""
    input_size: list[int] | None = Field([640, 320], min_length=2, max_length=2)
    """``[width, height]`` the vehicle's crop is fitted into for the text detector (bigger
    finds smaller plates, and costs more; 480 x 256 missed 5 of 120 readable 20-35 px plates
    of the tuning crops that 640 x 320 finds, bench/results/plates.md)."""
    input: InputConfig = Field(default_factory=_det_input)
    """The detector's input (``[nodes.NAME.input]``): PP-OCR's, BGR, ``(x / 255 - 0.5) /
    0.5``."""
    on_classes: list[str] | None = Field(default_factory=lambda: list(VEHICLES))
    """Class names of the objects read (default: car, truck, bus, motorcycle)."""
    on_frame: bool = False
    """Read the whole frame (or ``region`` of it) instead of tracked objects: a camera that
    sees only plates (a gate, a car park's entrance), no detector or tracker needed."""
    region: list[float] = Field([0.0, 0.0, 1.0, 1.0], min_length=4, max_length=4)
    """The part of the vehicle's box to look in, ``[x1, y1, x2, y2]`` in fractions of it; with
    ``on_frame``, the part of the frame (where the plates pass)."""
    every_s: float = Field(0.2, gt=0)
    """With ``on_frame``: stream seconds between two reads of a source's frame."""
    gone_s: float = Field(2.0, gt=0)
    """With ``on_frame``: a plate not read for this long has left; read again later, it is
    a new sighting (and a new event)."""
    text_thresh: float = Field(0.3, gt=0, lt=1)
    """The detector's map: a pixel above this is text."""
    box_thresh: float = Field(0.5, gt=0, lt=1)
    """A text region's mean score must be at least this."""
    unclip: float = Field(1.6, ge=1, le=4)
    """How much a region is grown around the detector's core of the text."""
    min_chars: int = Field(4, ge=1, le=20)
    """A plate has at least this many characters (separators not counted)..."""
    max_chars: int = Field(10, ge=1, le=20)
    """...and at most this many..."""
    allowed: str = Field("A-Z0-9", min_length=1)
    """...all of this regular-expression character class (upper case: reads are made upper
    case, and spaces, dashes and dots dropped, before they are checked)."""
    known: str | None = None
    """A file of known plates: a plate and its name a line (``KX-4921  Alice's van``)."""
    known_plates: dict[str, str] = Field(default_factory=dict)
    """Known plates in the config: ``{ "KX-4921" = "Alice's van" }``."""
    tolerance: int = Field(1, ge=0, le=3)
    """A read names a known plate it differs from by at most this many characters (and
    none other as near)."""
    attempts: int = Field(6, ge=1, le=1000)
    """Reads per track and round at most (a round: a new track, a box grown by ``grow``)."""
    retry_s: float = Field(0.15, ge=0)
    """Stream seconds between two reads of one track."""
    min_attempts: int = Field(2, ge=1)
    """A plate holds after at least this many reads of its track..."""
    agree: float = Field(0.5, gt=0, le=1)
    """...when this fraction of the attempts read a plate of the voted length."""
    threshold: float | None = Field(0.8, ge=0, le=1)
    """A read votes when its characters' mean probability is at least this."""
    min_size: int = Field(24, ge=1)
    """Vehicles whose box is narrower or lower than this (pixels) are not read."""
    max_batch: int = Field(8, ge=1, le=256)
    """Crops (and text lines) per model call."""
    skip_at_edge: bool = False
    """Unlike faces, a plate is often read while its vehicle is still entering the frame."""

    @model_validator(mode="after")
    def _shape_fits(self) -> PlatesConfig:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars ({self.min_chars}) is more than max_chars "
                             f"({self.max_chars})")  # fmt: skip
        return self

    def models(self) -> dict[str, str]:
        """The two files, ``rapidocr`` resolved to the installed package's (an error naming
        the key and what to install where it is not there)."""
        det = ocr.rapidocr_model("det", "model") if self.model == ocr.RAPIDOCR else self.model
        rec = self.rec_model
        if rec == ocr.RAPIDOCR:
            rec = ocr.rapidocr_model("rec", "rec_model")
        return {"model": det, "rec_model": rec}

    def shape(self) -> PlateShape:
        return PlateShape(self.min_chars, self.max_chars, self.allowed)
