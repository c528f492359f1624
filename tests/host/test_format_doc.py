"""docs/FORMAT.md is generated from the format definitions: it must match them exactly."""

from pathlib import Path

from zipsgd.host.format_doc import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md"


def test_format_doc_is_up_to_date():
    assert DOC.read_text() == render(), (
        "docs/FORMAT.md is stale: run `python -m zipsgd.host.format_doc > docs/FORMAT.md`")


def test_format_doc_shows_the_example_bytes():
    text = render()
    assert "89 5a 53 47 44 0d 0a 1a" in text  # the magic, as the file starts
    assert "| 69 | 4 | `payload_crc32` |" in text
    assert "| 53 | 8 | `beats_per_epoch` |" in text
    assert "| 20 | 1 | `levels` |" in text
    assert "crosses from beat 0 into beat 1" in text  # samples back to back
