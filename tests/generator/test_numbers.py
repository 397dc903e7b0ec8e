import pytest

from site_src.numbers import find_numbers, unbound_numbers


@pytest.mark.parametrize("text, flagged", [
    ("rho is 0.17 here", ["0.17"]),
    ("it moved 12% of the margin", ["12%"]),
    ("a drop of -3 points", ["-3"]),
    ("a drop of −0.2 and a gain of +1", ["−0.2", "+1"]),
    ("spread (±0.03).", ["±0.03"]),
    ("rho=-0.171, then", ["-0.171"]),
    ("The value was 0.5.", ["0.5"]),
    ("from 0.1–0.5", ["0.1", "0.5"]),
    ("1,024.5 rows", ["1,024.5"]),
    (".5 of them", [".5"]),
    ("a rho of 0,55 in the comma style", ["0,55"]),
    ("a rho of 0·55 with a middle dot", ["0·55"]),
    ("about ⅓ of them, or 1½ times", ["⅓", "1½"]),
    ("3/4 of the pairs", ["3/4"]),
])
def test_flagged(text, flagged):
    assert [n.text for n in unbound_numbers(text)] == flagged


@pytest.mark.parametrize("text", [
    "twelve dimensions, 12 layers and 64 components",
    "Skywork/Skywork-Reward-Llama-3.1-8B-v0.2 and ArmoRM-Llama3-8B-v0.1",
    "mlp_L31 attn_L0 v2 gpt-4 1e-6 3.5x",
    "on 2026-11-29, pages 5-10, 1,024 rows",
    "version 1.2.3 at 127.0.0.1",
    "pages 2026/11/29 and 1,024,000 rows",
])
def test_not_flagged(text):
    assert unbound_numbers(text) == []


def test_new_decimal_signs_read_as_numbers():
    assert [n.value for n in find_numbers("0,55 0·25 ⅓ 3/4 1½")] == [0.55, 0.25, 1 / 3, 0.75, 1.5]


def test_find_numbers_values():
    values = [n.value for n in find_numbers("was 1.2, is -0.625; 1,024 rows and 12%")]
    assert values == [1.2, -0.625, 1024, 12]
