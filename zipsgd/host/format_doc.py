"""Generates ``docs/FORMAT.md`` from the one Python definition of the stream and file formats.

Run ``python -m zipsgd.host.format_doc > docs/FORMAT.md`` (``make docs``); a test checks that
the committed document equals :func:`render`, so the two cannot drift apart.
"""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

import numpy as np

from ..spec import stream as stream_spec
from ..spec.stream import BUS_WIDTHS, Encoding, StreamLayout, pack_fields
from .quantize import epoch_rng, quantize_fields
from .zsgd_file import FIXED_BYTES, HEADER_FIELDS, Scaling, StreamHeader, write_stream

__all__ = ["render", "EXAMPLE"]

_SIZES = {"8s": 8, "B": 1, "H": 2, "I": 4, "Q": 8}

#: The worked example: (scaled label, scaled features) of two samples, double, b = 2, W = 64.
EXAMPLE = {
    "labels": [0.3, -1.0],
    "features": [[0.5, -0.8, 0.1], [1.0, 0.0, -0.35]],
    "bits": 2,
    "bus_width": 64,
    "seed": 7,
}


def _layout_table() -> str:
    out = io.StringIO()
    out.write("| encoding | b | field bits | " + " | ".join(f"fields/beat W={w}"
                                                        for w in BUS_WIDTHS) + " |\n")
    out.write("|---|---|---|" + "---|" * len(BUS_WIDTHS) + "\n")
    rows = [(e, b) for e in (Encoding.DOUBLE, Encoding.SINGLE) for b in range(1, 9)]
    rows.append((Encoding.RAW32, 32))
    for encoding, bits in rows:
        layouts = [StreamLayout(encoding, bits, w) for w in BUS_WIDTHS]
        out.write(f"| {encoding.name.lower()} | {bits if encoding != Encoding.RAW32 else '-'} | "
                  f"{layouts[0].field_width} | "
                  + " | ".join(str(lay.fields_per_beat) for lay in layouts) + " |\n")
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
    out.write(f"| {FIXED_BYTES} + 16 (n+1) | 4 | `header_crc32` | CRC-32 (zlib) of every header "
              "byte before it |\n")
    return out.getvalue()


def _example() -> str:
    bits, width = EXAMPLE["bits"], EXAMPLE["bus_width"]
    layout = StreamLayout(Encoding.DOUBLE, bits, width)
    labels = np.array(EXAMPLE["labels"])
    features = np.array(EXAMPLE["features"])
    fields = quantize_fields(labels, features, layout, epoch_rng(EXAMPLE["seed"], 0))
    payload = pack_fields(fields, layout)
    values = np.column_stack([labels, features])
    out = io.StringIO()
    out.write(f"Two samples, three features, `double` at b = {bits} ({1 << bits} intervals, "
              f"levels {', '.join(f'{v:g}' for v in np.linspace(-1, 1, (1 << bits) + 1))}), "
              f"W = {width}, seed {EXAMPLE['seed']}, epoch 0. Field width "
              f"{layout.field_width}, {layout.fields_per_beat} fields per beat, "
              f"{layout.beats_per_sample(3)} beat per sample.\n\n")
    out.write("| sample | field | value v | t = (v+1) 2^(b-1) | index i | P(up) | s1 | s2 | "
              "field bits (s2 s1 i) | F1 | F2 |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    for k in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[k, j]
            t = (v + 1) * (1 << (bits - 1))
            index = int(fields[k, j]) & ((1 << bits) - 1)
            s1 = (int(fields[k, j]) >> bits) & 1
            s2 = (int(fields[k, j]) >> (bits + 1)) & 1
            f1 = (2 * (index + s1) - (1 << bits)) << (8 - bits)
            f2 = (2 * (index + s2) - (1 << bits)) << (8 - bits)
            name = "label" if j == 0 else f"x{j - 1}"
            out.write(f"| {k} | {j} ({name}) | {v:g} | {t:g} | {index} | {t - index:g} | {s1} | "
                      f"{s2} | `{int(fields[k, j]):0{layout.field_width}b}` | {f1} | {f2} |\n")
    out.write("\nThe beats (tdata, most significant bit first), and the bytes as stored:\n\n")
    out.write("| beat | tdata (hex) | fields at bits | tlast | bytes in the file |\n"
              "|---|---|---|---|---|\n")
    beat_bytes = layout.beat_bytes
    fw = layout.field_width
    for beat in range(payload.size // beat_bytes):
        chunk = payload[beat * beat_bytes:(beat + 1) * beat_bytes]
        value = int.from_bytes(chunk.tobytes(), "little")
        spans = ", ".join(f"[{(i + 1) * fw - 1}:{i * fw}]" for i in range(4))
        out.write(f"| {beat} | `{value:0{width // 4}x}` | {spans} | 1 | "
                  f"`{chunk.tobytes().hex(' ')}` |\n")
    labels_word = [int(f) for f in fields[:, 0]]
    out.write(f"\nDecoded labels `Y = F1 + F2` (9 fraction bits): "
              f"{', '.join(str(_label(w, bits)) for w in labels_word)}.\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "example.zsgd"
        header = StreamHeader(layout, 3, 2, EXAMPLE["seed"], Scaling.MAXABS,
                              np.zeros(4), np.ones(4))
        write_stream(path, header, [payload])
        data = path.read_bytes()
    out.write(f"\nThe whole `.zsgd` file ({len(data)} bytes: {header.header_bytes} of header, "
              f"{header.payload_bytes} of payload; scale table all (0, 1)):\n\n```\n")
    for start in range(0, len(data), 16):
        row = data[start:start + 16]
        out.write(f"{start:04x}  {row.hex(' ')}\n")
    out.write("```\n")
    return out.getvalue()


def _label(field: int, bits: int) -> int:
    index = field & ((1 << bits) - 1)
    s1, s2 = (field >> bits) & 1, (field >> (bits + 1)) & 1
    return ((2 * (index + s1) - (1 << bits)) + (2 * (index + s2) - (1 << bits))) << (8 - bits)


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

Fields per beat for every encoding and bus width (bits above the last field are zero; a
field may cross a 64-bit word boundary inside a beat when W > 64):

{_layout_table()}
## Worked example

{_example()}
## The `.zsgd` file

All integers little-endian. The payload follows the header: `epoch_count` streams of
`n_samples` samples each, every one laid out as above, so the payload bytes are exactly what
the engine consumes as AXI4-Stream beats (byte k of a beat is `tdata[8k+7:8k]`).

{_header_table()}
A reader rejects (with `StreamFormatError`, naming what it expected and found): a wrong magic,
an unsupported version, a header CRC mismatch, a header size that does not match
`n_features`, counts out of range (features 1..2^24-1, samples 1..2^40, epochs 1..2^16), a
`beats_per_sample` or `payload_bytes` that contradicts the layout, non-finite offsets or
non-positive scales, a file shorter or longer than header plus payload, and a payload CRC
mismatch. Writers write to a temporary file in the same folder and rename it into place.
"""


if __name__ == "__main__":
    print(render(), end="")
