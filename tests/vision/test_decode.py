"""vision.decode (issue 76): the fast JPEG path gives Pillow's pixels exactly and hands back (None) what it does not
take (CMYK, PNG, truncated, empty), which Pillow then decodes; the named draft option's crops stay close to the
reference's and take the same boxes."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from vision import decode as D
from vision import stream
from vision.sources import UnreadableImage


def _jpeg(mode: str = "RGB", size: tuple[int, int] = (160, 120), seed: int = 0, **save) -> bytes:
    """A small photo-like JPEG: smooth colour fields plus grain (the entropy decoder, IDCT and upsampling all work)."""
    rng = np.random.default_rng(seed)
    w, h = size
    small = rng.integers(0, 256, (h // 16 + 2, w // 16 + 2, 3), dtype=np.uint8)
    arr = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), np.float32)
    arr = np.clip(arr + rng.normal(0, 20, (h, w, 1)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).convert(mode).save(buf, "JPEG", quality=90, **save)
    return buf.getvalue()


@pytest.fixture(params=["simplejpeg", "kornia_rs"])
def fast(request, monkeypatch):
    pytest.importorskip(request.param)
    monkeypatch.setenv("SUITE_JPEG_DECODER", request.param)
    D._reset()
    yield request.param
    D._reset()


@pytest.mark.parametrize("kind", ["rgb", "gray", "progressive", "444", "odd-size"])
def test_fast_decoder_gives_pillows_pixels_exactly(fast, kind):
    data = {"rgb": lambda: _jpeg(), "gray": lambda: _jpeg("L"), "progressive": lambda: _jpeg(progressive=True),
            "444": lambda: _jpeg(subsampling=0), "odd-size": lambda: _jpeg(size=(101, 77))}[kind]()
    got = D.fast_decode(data)  # taken by the fast path, not handed back
    ref = Image.open(io.BytesIO(data)).convert("RGB")
    assert D.jpeg_decoder()[0] == fast and got is not None and got.mode == "RGB" and got.size == ref.size
    assert np.array_equal(np.asarray(got), np.asarray(ref))
    assert np.array_equal(np.asarray(stream.decode(data, "x.jpg")), np.asarray(ref))


def test_what_the_fast_path_does_not_take_is_handed_back_to_pillow(fast):
    """CMYK JPEGs, PNGs, truncated, empty or not images: None, so vision.stream.decode decodes (its conversions,
    its words for an unreadable file)"""
    png = io.BytesIO()
    Image.new("RGB", (9, 7), (1, 2, 3)).save(png, "PNG")
    for data in (_jpeg("CMYK"), png.getvalue(), _jpeg()[:600], _jpeg()[:-2], b"", b"not an image"):
        assert D.fast_decode(data) is None
    cmyk = _jpeg("CMYK")
    assert np.array_equal(np.asarray(stream.decode(cmyk, "c.jpg")),
                          np.asarray(Image.open(io.BytesIO(cmyk)).convert("RGB")))
    with pytest.raises(UnreadableImage, match="t.jpg"):
        stream.decode(_jpeg()[:600], "t.jpg")


def test_pillow_only_and_a_named_decoder_that_is_missing(monkeypatch):
    monkeypatch.setenv("SUITE_JPEG_DECODER", "pillow")
    D._reset()
    try:
        assert D.jpeg_decoder() == ("pillow", None) and D.fast_decode(_jpeg()) is None
        monkeypatch.setenv("SUITE_JPEG_DECODER", "libjpeg9000")
        D._reset()
        with pytest.raises(ValueError, match="one of simplejpeg, kornia_rs, pillow"):
            D.jpeg_decoder()
    finally:
        D._reset()


def _plan(seed: int, scale=(0.2, 1.0)):
    """crop boxes as vision.stream.Crops draws them: a pure function of (h, w), seeded afresh each call"""
    def boxes(h, w):
        rng = np.random.default_rng(seed)
        return [stream.crop_params(rng, h, w, scale, (3 / 4, 4 / 3)) for _ in range(2)]
    return boxes


DRAFT_MAD = 4.0  # mean absolute difference (0-255) a drafted crop may have from the reference's (measured ~1-3)


def test_draft_crops_are_close_to_the_reference_and_take_the_same_boxes():
    """a 640 x 480 JPEG cropped to 48: decoded at 1/2 or less in the DCT domain, the same boxes, each crop within
    DRAFT_MAD of the reference's (Pillow decode, crop, bilinear resize) on average; the evaluation crop too; a
    cut-off JPEG is None (the caller's Pillow decode names it)"""
    data = _jpeg(size=(640, 480), seed=1)
    im = Image.open(io.BytesIO(data)).convert("RGB")
    boxes = _plan(5, (0.5, 1.0))(480, 640)
    got = D.fast_crops(data, _plan(5, (0.5, 1.0)), 48, 1.0)
    assert got is not None and got[1] == boxes and D.draft_scale(640, 480, boxes, 48, 1.0) >= 2
    mad = [np.abs(stream.resized_crop(im, b, 48).astype(int) - c.astype(int)).mean() for b, c in zip(boxes, got[0])]
    assert all(c.shape == (48, 48, 3) for c in got[0]) and 0 < max(mad) < DRAFT_MAD, mad
    small = D.draft_image(data, 55, 1.0)
    assert small is not None and small.mode == "RGB" and small.width <= 320
    c_ref, c_got = stream.center_crop(im, 48, 55), stream.center_crop(small, 48, 55)
    assert np.abs(c_ref.astype(int) - c_got.astype(int)).mean() < DRAFT_MAD
    assert D.fast_crops(data[:700], _plan(5, (0.5, 1.0)), 48, 1.0) is None


def test_fast_crops_are_the_reference_crops_and_none_where_pillow_decides(fast):
    """without draft: the crops of decode then resized_crop, pixel for pixel (RGB, grayscale, progressive; a crop
    too large to reduce under draft too); not a JPEG, CMYK, cut off: None (the caller decodes with Pillow)"""
    for data in (_jpeg(size=(200, 150)), _jpeg("L", size=(200, 150)), _jpeg(progressive=True, size=(150, 200))):
        im = Image.open(io.BytesIO(data)).convert("RGB")
        for size, draft in ((32, None), (96, 1.0)):
            got = D.fast_crops(data, _plan(3), size, draft)
            assert got is not None and got[1] == _plan(3)(im.height, im.width)
            assert all(np.array_equal(c, stream.resized_crop(im, b, size)) for c, b in zip(*got))
    for bad in (b"not an image", b"", _jpeg("CMYK"), _jpeg()[:700], _jpeg()[:-2]):
        assert D.fast_crops(bad, _plan(3), 32) is None and D.fast_crops(bad, _plan(3), 32, 1.0) is None
    assert D.draft_image(_jpeg(size=(640, 480)), 55, None) is None


def test_draft_scale_keeps_every_crop_at_draft_times_the_size():
    assert D.draft_scale(500, 375, [(0, 0, 300, 400)], 224, None) == 1
    assert D.draft_scale(500, 375, [(0, 0, 300, 400)], 224, 1.0) == 1  # 300 < 2 x 224
    assert D.draft_scale(2000, 1500, [(0, 0, 900, 1200), (0, 0, 500, 500)], 224, 1.0) == 2
    assert D.draft_scale(4000, 3000, [(0, 0, 3000, 3000)], 224, 1.0) == 8
    assert D.draft_scale(4000, 3000, [(0, 0, 3000, 3000)], 224, 2.0) == 4
