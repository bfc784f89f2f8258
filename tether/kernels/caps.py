"""How much of a cell's output the transcript gets: `OutputCaps`, plain data in one place.

The defaults keep one cell's result to a few thousand tokens of text and a handful of
images (SPEC.md "eval" asks for capped output that says what was cut; its debug values
are capped at 400 characters, a table cell here at 40). Each cap is checked when built,
the bad value named in the error.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class OutputCaps:
    text_chars: int = 20_000  # the whole text of a cell's output
    stream_chars: int = 10_000  # each of stdout and stderr
    display_chars: int = 5_000  # each rich output (an echo, a display(), a table)
    displays: int = 40  # rich outputs per cell (the first and last ones are kept)
    images: int = 8  # images per cell (the first ones are kept)
    image_bytes: int = 1_500_000  # each image, decoded
    error_chars: int = 8_000  # the traceback
    table_rows: int = 20  # a DataFrame's rows shown (first and last halves)
    table_columns: int = 12  # its columns shown (first and last halves)
    table_cell_chars: int = 40  # each table cell

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if type(value) is not int or value < 1:
                raise ValueError(
                    f"OutputCaps.{spec.name} must be a positive whole number, got {value!r}"
                )
        if self.text_chars < 200:
            raise ValueError(
                f"OutputCaps.text_chars must leave room for output and cut markers "
                f"(at least 200), got {self.text_chars}"
            )
