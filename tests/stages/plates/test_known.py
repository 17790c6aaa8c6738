"""Known plates: the file's format and its errors (the line named), and which known plate a
read is (one character off tolerated, never one between two)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.plates.known import KnownPlates, checked_names, read_known
from vapipe.stages.plates.text import PlateShape

SHAPE = PlateShape()


def test_a_file_of_plates_and_names(tmp_path: Path) -> None:
    path = tmp_path / "known.txt"
    path.write_text(
        "# gate list\n"
        "KX-4921  Alice's van\n"
        "\n"
        "7HJK 582 Bob's car   # the blue one\n"
        "AB12CDE, Carol, second car\n"
        "DD 12\tDelivery\n",
        encoding="utf-8",
    )
    assert read_known(str(path), SHAPE) == {
        "KX4921": "Alice's van",
        "7HJK582": "Bob's car",
        "AB12CDE": "Carol, second car",
        "DD12": "Delivery",
    }


@pytest.mark.parametrize(
    ("line", "says"),
    [("KX4921", "expected a plate and a name"), ("K!X4 name", "not plate-shaped"),
     ("AB1 short", "not plate-shaped")],
)  # fmt: skip
def test_a_bad_line_is_named(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "known.txt"
    path.write_text(f"GOOD123 fine\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        read_known(str(path), SHAPE)
    assert f"{path}:2" in str(caught.value) and says in str(caught.value)


def test_a_plate_listed_twice_is_named(tmp_path: Path) -> None:
    path = tmp_path / "known.txt"
    path.write_text("KX-4921 one\nkx4921 two\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r":2: 'kx4921' is listed twice"):
        read_known(str(path), SHAPE)


def test_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the known plates"):
        read_known(str(tmp_path / "none.txt"), SHAPE)


def test_the_config_table_is_checked() -> None:
    assert checked_names({"kx-4921": "van"}, SHAPE, "known_plates") == {"KX4921": "van"}
    with pytest.raises(ConfigError, match="known_plates 'x': 'x' is not plate-shaped"):
        checked_names({"x": "van"}, SHAPE, "known_plates")


def test_one_character_off_is_named_two_are_not() -> None:
    known = KnownPlates({"KX4921": "van", "7HJK582": "car"}, tolerance=1)
    exact = known.match("KX4921")
    assert exact is not None and (exact.name, exact.distance) == ("van", 0)
    near = known.match("KX4927")
    assert near is not None and (near.plate, near.name, near.distance) == ("KX4921", "van", 1)
    dropped = known.match("KX492")
    assert dropped is not None and dropped.name == "van"
    assert known.match("KY4927") is None  # two characters away
    assert known.match("ZZZZ999") is None
    assert len(known) == 2


def test_a_read_as_near_to_two_known_plates_names_neither() -> None:
    known = KnownPlates({"AB1234": "one", "AB1236": "two"}, tolerance=1)
    assert known.match("AB1235") is None
    nearer = known.match("AB1234")
    assert nearer is not None and nearer.name == "one"


def test_a_wider_tolerance_and_none() -> None:
    assert KnownPlates({"KX4921": "van"}, tolerance=2).match("KY4927") is not None
    assert KnownPlates({"KX4921": "van"}, tolerance=0).match("KX4927") is None


@pytest.mark.parametrize(
    ("line", "plate", "name"),
    [("AB 1234 Carol", "AB1234", "Carol"), ("KX4921 Bob Smith", "KX4921", "Bob Smith"),
     ("ABCD 12", "ABCD", "12"), ("7HJK 582 Bob", "7HJK582", "Bob"),
     ("ABCDE 1234 van", "ABCDE1234", "van")],
)  # fmt: skip
def test_where_the_plate_ends_and_the_name_starts(tmp_path: Path, line: str, plate: str,
                                                  name: str) -> None:  # fmt: skip
    path = tmp_path / "known.txt"
    path.write_text(line + "  # a comment # with a hash\n", encoding="utf-8")
    assert read_known(str(path), SHAPE) == {plate: name}


def test_a_second_word_of_five_characters_is_the_name(tmp_path: Path) -> None:
    path = tmp_path / "known.txt"
    path.write_text("AB 12345 Carol\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'AB' is not plate-shaped"):
        read_known(str(path), SHAPE)


def test_the_nearest_of_two_near_plates_is_named() -> None:
    known = KnownPlates({"ZZ999999": "far", "AB1236": "two", "AB1299": "one"}, tolerance=2)
    near = known.match("AB1235")
    assert near is not None and (near.name, near.distance) == ("two", 1)
    assert KnownPlates({"ABCDEFGHIJ": "long", "KX4921": "van"}).tolerance == 1
    # A plate of another length first in the list does not stop the search.
    found = KnownPlates({"ABCDEFGHIJ": "long", "KX4921": "van"}).match("KX4927")
    assert found is not None and found.name == "van"
