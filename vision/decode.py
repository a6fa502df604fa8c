"""Faster decoding for the streamed loader (issue 76): Pillow's pixels, sooner; and a named option that trades
pixels for speed. Below :mod:`vision.stream` (which calls it; nothing here imports it).

- :func:`fast_decode`: a JPEG that Pillow reads as RGB or grayscale (baseline or progressive, YCbCr or gray, within
  Pillow's decompression-bomb limit) decoded by libjpeg-turbo directly, through ``simplejpeg`` (``pip install
  contrastive-suite[fastjpeg]``) or ``kornia_rs``, whichever is installed: the library Pillow links, the same
  accurate integer IDCT and fancy upsampling, so Pillow's pixels bit for bit (``tests/vision/test_decode.py``; the
  loader benchmark's ImageNet-sized JPEGs: maximum difference 0). Anything else is None: CMYK and YCCK JPEGs, PNG
  and the rest, a truncated or corrupt JPEG (``strict``: a libjpeg warning is a refusal), no fast decoder installed.
  None means "Pillow's job": :func:`vision.stream.decode` goes on as before, its conversions and its words for an
  unreadable file; the fast decoder never decides that a file is unreadable. ``SUITE_JPEG_DECODER=pillow`` (or
  ``simplejpeg``, ``kornia_rs``) chooses; read once per process.
- :func:`fast_crops`: the loader's random resized crops straight from the bytes (one header read), the same arrays
  as decoding with Pillow then cropping.
- The named option ``draft`` (off by default; :func:`fast_crops`, :func:`draft_image`): a JPEG decoded at 1/2, 1/4
  or 1/8 of its size in the DCT domain (Pillow's ``Image.draft``) when every crop taken from it keeps at least
  ``draft`` times the output size (``draft=2.0`` is Pillow's ``thumbnail`` ``reducing_gap``): less to decode and to
  resize, and the pixels are no longer the reference's (the crops' mean absolute difference is measured by the
  loader benchmark, ``draft_crop_mad``, and bounded in the tests). The crop boxes are drawn on the full image's size
  either way, so the same random crops are taken.
"""
from __future__ import annotations

import io
import os
import warnings
from typing import Any, Callable

import numpy as np

Box = tuple[int, int, int, int]  # (top, left, h, w), vision.stream's convention
DECODERS = ("simplejpeg", "kornia_rs", "pillow")  # the order tried when SUITE_JPEG_DECODER is unset
DRAFT_SCALES = (8, 4, 2)  # the DCT-domain reductions Pillow's draft asks libjpeg for

_chosen: tuple[str, Callable[[bytes], np.ndarray] | None] | None = None


def _simplejpeg() -> Callable[[bytes], np.ndarray]:
    import simplejpeg

    def run(data: bytes) -> np.ndarray:
        return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=False, fastupsample=False, strict=True)

    return run


def _kornia_rs() -> Callable[[bytes], np.ndarray]:
    import kornia_rs

    def run(data: bytes) -> np.ndarray:
        return np.asarray(kornia_rs.io.decode_image_jpegturbo(data, "rgb"))

    return run


def jpeg_decoder() -> tuple[str, Callable[[bytes], np.ndarray] | None]:
    """(name, function bytes -> (H, W, 3) uint8) of the fast JPEG decoder this process uses; (``"pillow"``, None)
    when none is installed or ``SUITE_JPEG_DECODER=pillow``. A named decoder that is not installed is an error."""
    global _chosen
    if _chosen is None:
        want = os.environ.get("SUITE_JPEG_DECODER", "").strip().lower()
        if want and want not in DECODERS:
            raise ValueError(f"SUITE_JPEG_DECODER={want!r}: one of {', '.join(DECODERS)}")
        makers = {"simplejpeg": _simplejpeg, "kornia_rs": _kornia_rs}
        chosen: tuple[str, Callable[[bytes], np.ndarray] | None] = ("pillow", None)
        for name in [want] if want else DECODERS:
            if name == "pillow":
                break
            try:
                chosen = (name, makers[name]())
                break
            except ImportError:
                if want:
                    raise
        _chosen = chosen
    return _chosen


def _reset() -> None:
    """Forget the chosen decoder (tests, after changing ``SUITE_JPEG_DECODER``)."""
    global _chosen
    _chosen = None


def jpeg_header(data: bytes) -> Any:
    """Pillow's view of a JPEG's header, nothing decoded (its mode and size), or None if Pillow would not take it
    as a JPEG it decodes in RGB or grayscale, or would warn of a decompression bomb (Pillow's own path decides)."""
    from PIL import Image

    if not data:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data), formats=("JPEG",))
    except Exception:  # noqa: BLE001 - not a JPEG, or one Pillow refuses: the reference says why
        return None
    return im if im.mode in ("RGB", "L") and len(im.tile) == 1 else None


def fast_decode(data: bytes) -> Any:
    """Pillow's RGB image of an RGB or grayscale JPEG, pixel for pixel, decoded by the fast decoder; None when
    there is none, the file is anything else, or the decoder refuses it (then Pillow decodes, as before)."""
    head = None if jpeg_decoder()[1] is None else jpeg_header(data)
    return None if head is None else _fast(data, head)


def _fast(data: bytes, head: Any) -> Any:
    from PIL import Image

    _, run = jpeg_decoder()
    if run is None:
        return None
    try:
        arr = run(data)
    except Exception:  # noqa: BLE001 - any refusal (a warning under strict, an odd marker): Pillow decides
        return None
    if arr.dtype != np.uint8 or arr.shape != (head.size[1], head.size[0], 3):
        return None
    return Image.fromarray(arr, "RGB")


def draft_scale(width: int, height: int, boxes: list[Box], size: int, draft: float | None) -> int:
    """The DCT-domain reduction (1, 2, 4 or 8) for crops ``boxes`` of a ``width`` x ``height`` image resized to
    ``size``: the largest that leaves every crop at least ``draft`` x ``size`` pixels a side; 1 when ``draft`` is
    None or 0 (off)."""
    if not draft:
        return 1
    least = min(min(h, w) for _, _, h, w in boxes)
    for s in DRAFT_SCALES:
        if least >= draft * size * s and min(width, height) >= 8 * s:
            return s
    return 1


def _drafted(data: bytes, width: int, height: int, s: int) -> tuple[Any, int] | None:
    """The JPEG decoded at 1/s in the DCT domain (Pillow's ``draft``), in RGB, and the scale libjpeg took; None if
    Pillow fails on it, or the file does not end in the end-of-image marker (a reduced decode of a cut-off JPEG
    does not always fail, where the full one does): the caller's full decode names what is wrong."""
    if data.rstrip(b"\x00")[-2:] != b"\xff\xd9":
        return None
    try:
        from PIL import Image

        im = Image.open(io.BytesIO(data), formats=("JPEG",))
        im.draft("RGB", (width // s, height // s))
        im.load()
        got = im.size
        im = im.convert("RGB") if im.mode != "RGB" else im
    except Exception:  # noqa: BLE001 - the full decode names what is wrong
        return None
    for t in (8, 4, 2, 1):
        if got == ((width + t - 1) // t, (height + t - 1) // t):
            return im, t
    return None


def scaled_crop(im: Any, box: Box, size: int, s: int) -> np.ndarray:
    """A crop (top, left, h, w) in full-size pixels of an image decoded at 1/s, bilinear to (size, size, 3) uint8
    (the box scaled by 1/s, fractional: Pillow's ``resize(box=)``)."""
    from PIL import Image

    top, left, h, w = box
    b = (left / s, top / s, (left + w) / s, (top + h) / s)
    return np.asarray(im.resize((size, size), Image.BILINEAR, box=b), dtype=np.uint8)


def _crop(im: Any, box: Box, size: int) -> np.ndarray:
    """:func:`vision.stream.resized_crop` (crop, bilinear resize; the same arrays): (size, size, 3) uint8."""
    from PIL import Image

    top, left, h, w = box
    return np.asarray(im.crop((left, top, left + w, top + h)).resize((size, size), Image.BILINEAR), dtype=np.uint8)


def fast_crops(data: bytes, plan: Callable[[int, int], list[Box]], size: int,
               draft: float | None = None) -> tuple[list[np.ndarray], list[Box]] | None:
    """The random resized crops of one sample from its bytes, for :class:`vision.stream.Crops`: ``plan(height,
    width)`` -> the boxes (drawn on the full size; it must give the same boxes when called again), each cropped and
    resized to (size, size, 3) uint8. Without ``draft``: an RGB or grayscale JPEG through the fast decoder, the
    crops :func:`vision.stream.decode` then :func:`vision.stream.resized_crop` give, pixel for pixel. With the
    named option ``draft``: the JPEG decoded at 1/2, 1/4 or 1/8 in the DCT domain where every box keeps ``draft``
    x ``size`` pixels (:func:`draft_scale`), the boxes scaled with it (close pixels, not the same). None when the
    file is not such a JPEG, no fast decoder is installed, or a decoder refuses it: the caller decodes with Pillow
    and crops as before (and names an unreadable file in its own words)."""
    head = jpeg_header(data) if draft or jpeg_decoder()[1] is not None else None
    if head is None:
        return None
    width, height = head.size
    boxes = plan(height, width)
    s = draft_scale(width, height, boxes, size, draft)
    got = _drafted(data, width, height, s) if s > 1 else None
    if got is not None and got[1] > 1:
        return [scaled_crop(got[0], b, size, got[1]) for b in boxes], boxes
    im = _fast(data, head)
    if im is None:
        return None
    return [_crop(im, b, size) for b in boxes], boxes


def draft_image(data: bytes, resize: int, draft: float | None) -> Any:
    """The named ``draft`` option for the evaluation crop (short side to ``resize``): the JPEG decoded at 1/2, 1/4
    or 1/8 when its short side keeps ``draft`` x ``resize``, an RGB image; None otherwise (decode it in full)."""
    head = jpeg_header(data) if draft else None
    if head is None:
        return None
    width, height = head.size
    short = min(width, height)
    s = draft_scale(width, height, [(0, 0, short, short)], resize, draft)
    got = _drafted(data, width, height, s) if s > 1 else None
    return None if got is None else got[0]
