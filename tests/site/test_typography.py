from site_src.typography import keep_units


def test_a_number_keeps_its_percent_sign_and_text_is_escaped():
    assert keep_units("gain 0.045 with 80 % power <b>") == "gain 0.045 with 80\u00a0% power &lt;b&gt;"
    assert keep_units("60 to 66 % of pairs, 3 ‰") == "60 to 66\u00a0% of pairs, 3\u00a0‰"
    assert keep_units("a % sign alone") == "a % sign alone"
