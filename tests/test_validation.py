"""validator.validation: plain data into dataclasses and back through pydantic, every problem with its
location on one line (what `rules lint` prints), JSON the way the report always looked. The records below
declare their rules the way the pack's do (``validator.pack_schema``)."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pytest
from pydantic import ConfigDict, Field

from validator.pack_schema import Bool, Date, Float, Int
from validator.validation import ValidationError, dump, format_loc, load, problems


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class _Record:
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")


@dataclass(frozen=True, kw_only=True)
class Inner(_Record):
    n: Annotated[Int, Field(ge=1, le=9)]
    ratio: Annotated[Float, Field(gt=0, lt=1)] = 0.5


@dataclass(frozen=True, kw_only=True)
class Outer(_Record):
    name: Annotated[str, Field(pattern=r"^[a-z]+$")]
    colour: Colour
    mode: Literal["a", "b"] = "a"
    shape: tuple[Int, Int] = (1, 1)
    tags: Annotated[tuple[str, ...], Field(min_length=1)] = ("x",)
    table: dict[str, str] = field(default_factory=dict)
    inner: Inner | None = None
    items: list[Inner] = field(default_factory=list)
    when: Date | None = None
    flag: Bool = False
    anything: Any = None

    def __post_init__(self) -> None:
        if self.mode == "b" and self.inner is None:
            raise ValueError("mode b needs inner")


def located(data: object) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as exc:
        load(Outer, data)
    return [(format_loc(loc), msg) for loc, msg in problems(exc.value)]


def test_valid_data_becomes_typed_records() -> None:
    out = load(
        Outer,
        {
            "name": "abc",
            "colour": "blue",
            "shape": [2, 3],
            "tags": ["p", "q"],
            "inner": {"n": "4"},  # lax where pydantic was: a numeric string is an int
            "items": [{"n": 2, "ratio": 0.25}],
            "when": "2030-01-31",
            "flag": "yes",
            "anything": {"k": [1]},
        },
    )
    assert out.colour is Colour.BLUE and out.shape == (2, 3) and out.tags == ("p", "q")
    assert out.inner == Inner(n=4) and isinstance(out.inner.ratio, float)
    assert out.items == [Inner(n=2, ratio=0.25)] and out.when == dt.date(2030, 1, 31)
    assert out.flag is True and out.anything == {"k": [1]}


def test_every_problem_is_reported_with_its_location() -> None:
    found = located(
        {
            "name": "ABC",
            "colour": "green",
            "mode": "c",
            "shape": [1],
            "tags": [],
            "table": {"k": 3},
            "inner": {"n": 0, "ratio": 1.0},
            "items": [{"n": 1}, {"m": 1}],
            "when": "someday",
            "flag": "maybe",
            "extra": 1,
        }
    )
    assert found == [
        ("name", "String should match pattern '^[a-z]+$'"),
        ("colour", "Input should be 'red' or 'blue'"),
        ("mode", "Input should be 'a' or 'b'"),
        ("shape", "List should have 2 items, not 1"),
        ("tags", "List should have at least 1 item, not 0"),
        ("table.k", "Input should be a valid string"),
        ("inner.n", "Input should be greater than or equal to 1"),
        ("inner.ratio", "Input should be less than 1"),
        ("items[1].n", "Field required"),
        ("items[1].m", "Extra inputs are not permitted"),
        ("when", "Input should be a valid date in the format YYYY-MM-DD"),
        ("flag", "Input should be a valid boolean, unable to interpret input"),
        ("extra", "Extra inputs are not permitted"),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("three", "Input should be a valid integer, unable to parse string as an integer"),
        (3.5, "Input should be a valid integer, got a number with a fractional part"),
        (True, "Input should be a valid integer"),  # YAML's `yes` is not a step count
        ("3.0", "Input should be a valid integer, unable to parse string as an integer"),
        (math.nan, "Input should be a finite number"),
        (None, "Input should be a valid integer"),
        ([1], "Input should be a valid integer"),
    ],
)
def test_integers_are_not_guessed(value: object, message: str) -> None:
    assert located({"name": "a", "colour": "red", "inner": {"n": value}}) == [("inner.n", message)]


def test_missing_fields_wrong_containers_and_the_records_own_rules() -> None:
    assert located({}) == [("name", "Field required"), ("colour", "Field required")]
    assert located([1, 2]) == [("", "Input should be a dictionary or an instance of Outer")]
    assert located({"name": "a", "colour": "red", "items": {"n": 1}}) == [
        ("items", "Input should be a valid list")
    ]
    # a record's own rules run once its fields are valid
    assert located({"name": "a", "colour": "red", "mode": "b"}) == [("", "Value error, mode b needs inner")]
    assert located({"name": "A", "colour": "red", "mode": "b"}) == [
        ("name", "String should match pattern '^[a-z]+$'")
    ]


def test_dump_writes_the_report_json_shape() -> None:
    @dataclass(kw_only=True)
    class Result:
        score: float
        pair: tuple[float, float] | None
        colour: Colour
        hidden: str = field(default="x", metadata={"exclude": True})
        evidence: dict[str, Any] = field(default_factory=dict)

    r = Result(
        score=3,
        pair=(1, 2),
        colour=Colour.RED,
        evidence={
            "path": Path("/m"),
            "nan": math.nan,
            "set": {1},
            "t": (1, "a"),
            Colour.BLUE: dt.date(2030, 1, 2),
        },
    )
    data = dump(r)
    assert data == {
        "score": 3.0,
        "pair": [1.0, 2.0],
        "colour": "red",
        "evidence": {"path": "/m", "nan": None, "set": [1], "t": [1, "a"], "blue": "2030-01-02"},
    }
    # floats stay floats in the text, as the report always wrote them
    assert json.dumps(data).startswith('{"score": 3.0, "pair": [1.0, 2.0]')


def test_a_location_is_one_short_line_whatever_the_keys_hold() -> None:
    # an unknown key is the file's own text: a newline or an escape in it cannot split or colour the line,
    # and a 10,000-character key is cut
    found = located({"name": "a", "colour": "red", "bad\nkey\x1b[31m": 1, "k" * 10_000: 2})
    assert found == [
        ("bad\\nkey\\x1b[31m", "Extra inputs are not permitted"),
        ("k" * 60 + "...", "Extra inputs are not permitted"),
    ]
    assert format_loc(("checks", 3, "severity")) == "checks[3].severity"
    # a mapping's key of the wrong type is said as such, at the key
    assert located({"name": "a", "colour": "red", "table": {7: "x"}}) == [
        ("table[7]", "Keys should be strings")
    ]


def test_a_short_list_is_said_once_at_the_list() -> None:
    assert located({"name": "a", "colour": "red", "shape": []}) == [
        ("shape", "List should have 2 items, not 0")
    ]
    assert located({"name": "a", "colour": "red", "shape": [1, 2, 3]}) == [
        ("shape", "List should have at most 2 items, not 3")
    ]
    # items of the wrong type are named; pydantic's count of the items that validated ("not 0") is not
    assert located({"name": "a", "colour": "red", "tags": [1, 2]}) == [
        ("tags[0]", "Input should be a valid string"),
        ("tags[1]", "Input should be a valid string"),
    ]


@pytest.mark.parametrize(
    ("field_", "value", "message"),
    [
        ("flag", 1.0, "Input should be a valid boolean"),  # a float is not a switch
        ("when", 0, "Input should be a valid date in the format YYYY-MM-DD"),  # nor a number a date
        ("when", dt.datetime(2030, 1, 31), "Input should be a valid date in the format YYYY-MM-DD"),
    ],
)
def test_scalars_are_lax_only_where_yaml_needs_it(field_: str, value: object, message: str) -> None:
    assert located({"name": "a", "colour": "red", field_: value}) == [(field_, message)]
    assert located({"name": "a", "colour": "red", "inner": {"n": 1, "ratio": True}}) == [
        ("inner.ratio", "Input should be a valid number")
    ]
    assert load(Outer, {"name": "a", "colour": "red", "when": " 2030-01-31 ", "flag": 1}).flag is True
