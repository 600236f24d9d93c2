"""validator.schema: plain data into the pack's and the report's dataclasses and back, every problem with
its location (what `rules lint` prints), JSON the way the report always looked."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from validator.schema import Ge, Gt, Le, Lt, MinLen, Pattern, Problem, SchemaError, dump, format_loc, load


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, kw_only=True)
class Inner:
    n: Annotated[int, Ge(1), Le(9)]
    ratio: Annotated[float, Gt(0), Lt(1)] = 0.5


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: Annotated[str, Pattern(r"^[a-z]+$")]
    colour: Colour
    mode: Literal["a", "b"] = "a"
    shape: tuple[int, int] = (1, 1)
    tags: Annotated[tuple[str, ...], MinLen(1)] = ("x",)
    table: dict[str, str] = field(default_factory=dict)
    inner: Inner | None = None
    items: list[Inner] = field(default_factory=list)
    when: dt.date | None = None
    flag: bool = False
    anything: Any = None

    def __check__(self) -> Iterator[Problem]:
        if self.mode == "b" and self.inner is None:
            yield ("inner",), "Value error, mode b needs inner"


def problems(data: object) -> list[tuple[str, str]]:
    with pytest.raises(SchemaError) as exc:
        load(Outer, data)
    return [(format_loc(loc), msg) for loc, msg in exc.value.problems]


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
    found = problems(
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
        ("shape", "Tuple should have 2 items, not 1"),
        ("tags", "List should have at least 1 item"),
        ("table.k", "Input should be a valid string"),
        ("inner.n", "Input should be greater than or equal to 1"),
        ("inner.ratio", "Input should be less than 1"),
        ("items[1].n", "Field required"),
        ("items[1].m", "Extra inputs are not permitted"),
        ("when", "Input should be a valid date in the format YYYY-MM-DD"),
        ("flag", "Input should be a valid boolean"),
        ("extra", "Extra inputs are not permitted"),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("three", "Input should be a valid integer, unable to parse string as an integer"),
        (3.5, "Input should be a valid integer, got a number with a fractional part"),
        (True, "Input should be a valid integer"),  # YAML's `yes` is not a step count
        (None, "Input should be a valid integer"),
        ([1], "Input should be a valid integer"),
    ],
)
def test_integers_are_not_guessed(value: object, message: str) -> None:
    assert problems({"name": "a", "colour": "red", "inner": {"n": value}}) == [("inner.n", message)]


def test_missing_fields_wrong_containers_and_the_records_own_rules() -> None:
    assert problems({}) == [("name", "Field required"), ("colour", "Field required")]
    assert problems([1, 2]) == [("", "Input should be a valid dictionary or instance of Outer")]
    assert problems({"name": "a", "colour": "red", "items": {"n": 1}}) == [
        ("items", "Input should be a valid list")
    ]
    # a record's own rules run once its fields are valid, and say where
    assert problems({"name": "a", "colour": "red", "mode": "b"}) == [
        ("inner", "Value error, mode b needs inner")
    ]
    assert problems({"name": "A", "colour": "red", "mode": "b"}) == [
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
