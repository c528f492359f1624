"""Generates ``docs/FORMAT.md`` from the one Python definition of the stream and file formats.

Run ``python -m zipsgd.host.format_doc > docs/FORMAT.md`` (``make docs``); a test checks that
the committed document equals :func:`render`, so the two cannot drift apart.
"""

from __future__ import annotations

import io
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..spec import stream as stream_spec
from ..spec.stream import (
    BUS_WIDTHS,
    GROUP_LIMIT,
    LEVEL_ONE,
    TABLE_GROUP_LIMIT,
    Encoding,
    StreamLayout,
    decode_fields,
    pack_stream,
)
from .quantize import epoch_rng, quantize_fields
from .zsgd_file import FIXED_BYTES, HEADER_FIELDS, VERSION, Scaling, StreamHeader, write_stream

__all__ = ["render", "EXAMPLE"]

_SIZES = {"8s": 8, "B": 1, "H": 2, "I": 4, "Q": 8}

#: The worked example: (scaled label, scaled features) of two samples, double, b = 4, W = 64:
#: 36 bits a sample, so the second sample's fourth feature crosses into the second beat.
EXAMPLE = {
    "labels": [0.3, -1.0],
    "features": [[0.5, -0.8, 0.1, 0.9, -0.25], [1.0, 0.0, -0.35, 0.6, -0.7]],
    "bits": 4,
    "bus_width": 64,
    "seed": 7,
}
#: The bits-per-value table: feature counts, bus widths and the samples per epoch it uses.
BPV_FEATURES = (11, 100, 1000)
BPV_WIDTHS = (64, 512)
BPV_SAMPLES = 1000


def _every_layout(width: int) -> list[StreamLayout]:
    rows = [StreamLayout(e, b, width) for e in (Encoding.DOUBLE, Encoding.SINGLE)
            for b in range(1, 9)]
    return rows + [StreamLayout(Encoding.RAW32, 32, width)]


def _encoding_cells(layout: StreamLayout) -> str:
    bits = "-" if layout.encoding is Encoding.RAW32 else layout.bits
    return f"| {layout.encoding.name.lower()} | {bits} | {layout.field_width} |"


def _layout_table() -> str:
    out = io.StringIO()
    out.write("| encoding | b | field bits | " + " | ".join(f"fields/beat W={w}"
                                                        for w in BUS_WIDTHS) + " |\n")
    out.write("|---|---|---|" + "---|" * len(BUS_WIDTHS) + "\n")
    for layout in _every_layout(64):
        layouts = [replace(layout, bus_width=w) for w in BUS_WIDTHS]
        out.write(_encoding_cells(layout) + " "
                  + " | ".join(str(lay.fields_per_beat) for lay in layouts) + " |\n")
    return out.getvalue()


def _bits_per_value_tables() -> str:
    """Bits on the wire per feature value, v2 against its limit and against v1."""
    out = io.StringIO()
    for n in BPV_FEATURES:
        out.write(f"\n`n = {n}` features, K = {BPV_SAMPLES} samples per epoch:\n\n"
                  "| encoding | b | field bits | limit fw (n+1)/n | "
                  + " | ".join(f"v2 W={w}" for w in BPV_WIDTHS) + " | "
                  + " | ".join(f"v1 W={w}" for w in BPV_WIDTHS) + " |\n")
        out.write("|---|---|---|---|" + "---|" * (2 * len(BPV_WIDTHS)) + "\n")
        for layout in _every_layout(BPV_WIDTHS[0]):
            limit = layout.field_width * (n + 1) / n
            layouts = [replace(layout, bus_width=w) for w in BPV_WIDTHS]
            v2 = [lay.bits_per_value(n, BPV_SAMPLES) for lay in layouts]
            v1 = [lay.beats_per_sample(n) * lay.bus_width / n for lay in layouts]
            out.write(_encoding_cells(layout) + f" {limit:.3f} | "
                      + " | ".join(f"{v:.3f} ({v / limit - 1:+.2%})" for v in v2) + " | "
                      + " | ".join(f"{v:.3f}" for v in v1) + " |\n")
    return out.getvalue()


def _header_table() -> str:
    out = io.StringIO()
    out.write("| offset | bytes | field | meaning |\n|---|---|---|---|\n")
    offset = 0
    for name, code, meaning in HEADER_FIELDS:
        size = _SIZES[code]
        out.write(f"| {offset} | {size} | `{name}` | {meaning} |\n")
        offset += size
    assert offset == FIXED_BYTES
    out.write(f"| {FIXED_BYTES} | 16 (n+1) | `scale_table` | (offset, scale) float64 pairs, "
              "label first, then the features: a scaled value v stands for offset + scale v |\n")
    out.write(f"| {FIXED_BYTES} + 16 (n+1) | 2 (n+1) (2^b+1), if `levels` = 1 | `level_table` | "
              "int16 level words, n+1 rows (label first) of 2^b+1 levels: row j is the level "
              f"table of field j (word / {LEVEL_ONE} is the level in [-1, 1]) |\n")
    out.write(f"| {FIXED_BYTES} + 16 (n+1) [+ level table] | 4 | `header_crc32` | CRC-32 (zlib) "
              "of every header byte before it |\n")
    return out.getvalue()


def _beat_fields(beat: int, layout: StreamLayout, n_fields: int, n_samples: int) -> str:
    """The fields (``s.j``) a beat holds, with their bits in the beat (a crossing field shows
    the part the beat holds)."""
    fw, width = layout.field_width, layout.bus_width
    parts = []
    for f in range(n_fields * n_samples):
        low, high = max(f * fw, beat * width), min((f + 1) * fw, (beat + 1) * width)
        if low < high:
            split = "" if high - low == fw else f" (bits {low - f * fw}..{high - f * fw - 1})"
            sample, j = divmod(f, n_fields)
            parts.append(f"{sample}.{j} [{high - 1 - beat * width}:{low - beat * width}]"
                         f"{split}")
    return ", ".join(parts)


def _example() -> str:
    bits, width = EXAMPLE["bits"], EXAMPLE["bus_width"]
    layout = StreamLayout(Encoding.DOUBLE, bits, width)
    labels = np.array(EXAMPLE["labels"])
    features = np.array(EXAMPLE["features"])
    n_samples, n_features = features.shape
    fields = quantize_fields(labels, features, layout, epoch_rng(EXAMPLE["seed"], 0))
    payload = pack_stream(fields, layout)
    decoded = decode_fields(fields, layout)
    values = np.column_stack([labels, features])
    fw = layout.field_width
    out = io.StringIO()
    out.write(f"Two samples, {n_features} features, `double` at b = {bits} ({1 << bits} "
              f"intervals, levels -1 + q/{1 << (bits - 1)}), W = {width}, seed "
              f"{EXAMPLE['seed']}, epoch 0. Field width {fw}, so a sample (label and "
              f"{n_features} features) takes {(n_features + 1) * fw} bits: sample 1 starts at "
              f"bit {(n_features + 1) * fw}, right after sample 0, and its field 4 (x3) crosses "
              f"from beat 0 into beat 1. The epoch takes "
              f"{layout.stream_beats(n_features, n_samples)} beats.\n\n")
    out.write("| sample | field | stream bits | value v | t = (v+1) 2^(b-1) | index i | P(up) | "
              "s1 | s2 | field bits (s2 s1 i) | F1 | F2 |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for k in range(n_samples):
        for j in range(n_features + 1):
            v = values[k, j]
            t = (v + 1) * (1 << (bits - 1))
            field = int(fields[k, j])
            index, s1, s2 = field & ((1 << bits) - 1), (field >> bits) & 1, field >> (bits + 1)
            f = k * (n_features + 1) + j
            f1, f2 = _level_word(index + s1, bits), _level_word(index + s2, bits)
            name = "label" if j == 0 else f"x{j - 1}"
            out.write(f"| {k} | {j} ({name}) | [{(f + 1) * fw - 1}:{f * fw}] | {v:g} | {t:g} | "
                      f"{index} | {t - index:g} | {s1} | {s2} | `{field:0{fw}b}` | {f1} | "
                      f"{f2} |\n")
    out.write("\nThe beats (tdata, most significant bit first), and the bytes as stored; "
              "`s.j` is field j of sample s:\n\n")
    out.write("| beat | tdata (hex) | fields at bits of the beat | tlast | bytes in the file |\n"
              "|---|---|---|---|---|\n")
    beat_bytes = layout.beat_bytes
    n_beats = payload.size // beat_bytes
    for beat in range(n_beats):
        chunk = payload[beat * beat_bytes:(beat + 1) * beat_bytes]
        value = int.from_bytes(chunk.tobytes(), "little")
        out.write(f"| {beat} | `{value:0{width // 4}x}` | "
                  f"{_beat_fields(beat, layout, n_features + 1, n_samples)} | "
                  f"{int(beat == n_beats - 1)} | `{chunk.tobytes().hex(' ')}` |\n")
    used = layout.stream_bits(n_features, n_samples)
    out.write(f"\nBits {used % width}..{width - 1} of beat {n_beats - 1} are padding (zero). "
              f"Decoded labels `Y = F1 + F2` (9 fraction bits): "
              f"{', '.join(str(int(y)) for y in decoded.label)}.\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "example.zsgd"
        header = StreamHeader(layout, n_features, n_samples, EXAMPLE["seed"], Scaling.MAXABS,
                              np.zeros(n_features + 1), np.ones(n_features + 1))
        write_stream(path, header, [payload])
        data = path.read_bytes()
    out.write(f"\nThe whole `.zsgd` file ({len(data)} bytes: {header.header_bytes} of header, "
              f"{header.payload_bytes} of payload; scale table all (0, 1), uniform levels):"
              f"\n\n```\n")
    for start in range(0, len(data), 16):
        row = data[start:start + 16]
        out.write(f"{start:04x}  {row.hex(' ')}\n")
    out.write("```\n")
    return out.getvalue()


def _level_word(q: int, bits: int) -> int:
    return (2 * q - (1 << bits)) << (8 - bits)


def render() -> str:
    """The full text of ``docs/FORMAT.md``."""
    doc = stream_spec.__doc__.strip().split("\n", 2)[2]
    doc = re.sub(r":\w+:`([^`]+)`", r"`\1`", doc).replace("``", "`")
    return f"""# The packed stream and the `.zsgd` file

Generated by `python -m zipsgd.host.format_doc` from `zipsgd/spec/stream.py` and
`zipsgd/host/zsgd_file.py` (the one definition of both formats); `tests/host/test_format_doc.py`
fails if this file and the code disagree. Do not edit by hand.

## The stream (what the engine reads on its AXI4-Stream input)

{doc}

Quantization (`zipsgd/host/quantize.py`): a scaled value `v` in [-1, 1] at b bits has
`t = (v + 1) 2^(b-1)`, interval index `i = min(floor(t), 2^b - 1)` and rounds up to level `i + 1`
with probability `t - i`, so the expected level is `t` and the expected value is `v`. Each
sample bit is drawn independently (`double` draws two per field, label included).

## Worked example

{_example()}
## Bits per value

What an epoch moves per feature value, counting the label field and all padding, in stream
format v2 (`StreamLayout.bits_per_value`) against its limit `field_width (n+1)/n` (in
brackets: how far above it) and against the v1 beat layout (`beats_per_sample W / n`, where
every sample starts on a new beat). The final padding is at most `W / (K (n+1) field_width)` of
the limit and a long sample's padding slots (n + 1 > {GROUP_LIMIT}) under 1/{GROUP_LIMIT // 2}:
under 1 % in all for every n >= 1, W and encoding once `K >= 200 W / ((n+1) field_width)`
(K >= 25600 covers every case). A stream with per-feature level tables pads for
{TABLE_GROUP_LIMIT} (n + 1 > {TABLE_GROUP_LIMIT}), under 1/{TABLE_GROUP_LIMIT // 2} of its slots.
{_bits_per_value_tables()}
## The v1 beat layout (the current engine)

Fields per v1 beat for every encoding and bus width (bits above the last field are zero; a
field may cross a 64-bit word boundary inside a beat when W > 64). The host converts a v2
stream into these beats as it feeds the current engine (`restream_v1`).

{_layout_table()}
## The `.zsgd` file (version {VERSION})

All integers little-endian. The payload follows the header: `epoch_count` v2 streams of
`n_samples` samples each, every one starting on a fresh beat and `beats_per_epoch` beats long,
so the payload bytes are exactly what the v2 engine consumes as AXI4-Stream beats (byte k of a
beat is `tdata[8k+7:8k]`). Readers check it in chunks of whole beats, each with its own CRC-32.

{_header_table()}
A level table (`levels` = 1) is allowed for `double` and `single` only; every row must start at
-{LEVEL_ONE}, end at +{LEVEL_ONE} and strictly increase (interior words -{LEVEL_ONE - 1}..\
{LEVEL_ONE - 1}); the writer refuses another table with `ConfigError`, the reader with
`StreamFormatError`, both naming the row and the entry. With the uniform table the decoded words
are exactly those of `levels` = 0.

A reader rejects (with `StreamFormatError`, naming what it expected and found): a wrong magic,
another version (named, with the advice to re-pack the data with `zipsgd quantize`: version 1
put every sample on new beats, version 2 did not pad samples of more than {GROUP_LIMIT}
fields), a header CRC mismatch, a header size that does not match `n_features` and the level
table, counts out of range (features 1..2^24-1, samples 1..2^40, epochs 1..2^16), a
`beats_per_epoch` or `payload_bytes` that contradicts the layout, a bad level table, non-finite
offsets or non-positive scales, a file shorter or longer than header plus payload, a payload
CRC mismatch and a nonzero padding slot. Writers write to a temporary file in the
same folder and rename it into place.
"""


if __name__ == "__main__":
    print(render(), end="")
