import random
import re
import unicodedata

import pytest

from dedup_assets.core.text.normalize import (
    Shingling,
    document_shingles,
    joined,
    normalize_text,
    normalize_unicode,
    token_shingles,
    tokenize,
)

WORDS = Shingling(5, "word")


def test_spec_unicode_example_with_han_characters_as_tokens():
    # the specification's example; its Han characters are now a token each (issue 36)
    assert normalize_text("  Café—RÉSUMÉ_数据  ") == "cafe resume 数 据"


def test_punctuation_underscore_and_whitespace_become_single_spaces():
    assert normalize_text("a,b;\tc__d\n\n e!!!") == "a b c d e"


def test_every_han_hiragana_and_katakana_character_is_a_token():
    assert normalize_text("数据，处理。完成！") == "数 据 处 理 完 成"
    assert tokenize(normalize_text("東京タワーへ行きますabc123")) == [
        "東", "京", "タ", "ワ", "ー", "へ", "行", "き", "ま", "す", "abc123",
    ]


def test_a_one_character_edit_of_chinese_text_changes_only_nearby_shingles():
    text = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉"  # 20 different characters
    edited = text.replace("子", "亥")  # the 11th
    left, right = document_shingles(text, WORDS), document_shingles(edited, WORDS)
    # 16 five-character shingles each; the edited character sits in 5 of them (a clause per
    # token, as before, made the whole text one shingle and the edit left none in common)
    assert len(left) == len(right) == 16
    assert len(left & right) == 11


def test_accents_are_dropped_in_latin_greek_cyrillic_hebrew_and_arabic():
    assert normalize_text("Crème Brûlée ΆΈΉ Йод") == "creme brulee αεη иод"
    assert normalize_text("שָׁלוֹם") == "שלום"
    assert normalize_text("كَتَبَ") == "كتب"


def test_marks_that_are_letters_stay_on_them():
    # Japanese voiced kana keep their voicing, whether written precomposed or decomposed
    assert normalize_text("子ども では") == "子 ど も で は"
    assert normalize_text("て\u3099は") == normalize_text("では")
    # Thai vowels and tones stay inside the word instead of splitting it
    assert tokenize(normalize_text("กรุงเทพมหานครเตรียม")) == ["กรุงเทพมหานครเตรียม"]
    # Devanagari vowel signs and virama are part of the word
    assert tokenize(normalize_text("हिन्दी भाषा")) == ["हिन्दी", "भाषा"]


def test_hangul_stays_in_syllables():
    assert normalize_text("한국어 텍스트") == "한국어 텍스트"
    decomposed = unicodedata.normalize("NFD", "한국어")
    assert normalize_text(decomposed) == "한국어"


def test_variation_selectors_and_emoji_separate():
    assert tokenize(normalize_text("ok\ufe0f👍\ufe0fgo")) == ["ok", "go"]


def test_none_and_blank_normalize_to_empty():
    assert normalize_text(None) == ""
    assert normalize_text(" \u3000 \n") == ""


def test_shingles_keep_token_order():
    tokens = "a b c d e f".split()
    assert token_shingles(tokens, 5) == {"a b c d e", "b c d e f"}
    assert token_shingles(list(reversed(tokens)), 5) == {"f e d c b", "e d c b a"}


def test_ascii_text_normalizes_as_the_unicode_steps_do():
    every = "".join(chr(code) for code in range(128))
    rng = random.Random(3)
    texts = [every, every[::-1]] + ["".join(rng.choices(every, k=rng.randint(0, 80))) for _ in range(2_000)]
    for text in texts:
        assert normalize_text(text) == normalize_unicode(text)


@pytest.mark.parametrize("unit", ["word", "char"])
def test_shingles_are_every_window_of_size_tokens(unit):
    rng = random.Random(unit)
    for _ in range(300):
        tokens = [rng.choice("abcdef") * rng.randint(1, 2) for _ in range(rng.randint(0, 30))]
        size = rng.randint(1, 7)
        windows = {joined(tokens[i : i + size], unit) for i in range(len(tokens) - size + 1)}
        assert token_shingles(tokens, size, unit) == (windows if len(tokens) >= size or not tokens else {joined(tokens, unit)})


def test_short_document_is_one_whole_shingle_and_empty_has_none():
    assert token_shingles(["only", "three", "tokens"], 5) == {"only three tokens"}
    assert token_shingles([], 5) == set()


def test_document_shingles_normalizes_first():
    assert document_shingles("Café RÉSUMÉ", WORDS) == document_shingles("cafe resume", WORDS) == {"cafe resume"}


def test_character_shingles_drop_spaces_and_join_without_them():
    assert tokenize("ab cd", "char") == ["a", "b", "c", "d"]
    assert document_shingles("Ab, cD!", Shingling(3, "char")) == {"abc", "bcd"}
    assert document_shingles("กรุง", Shingling(2, "char")) == {"กร", "รุ", "ุง"}
    assert document_shingles("ab", Shingling(3, "char")) == {"ab"}


def test_shingle_size_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        token_shingles(["a"], 0)


def _published_normalization(value: str) -> str:
    """The specification's normalize_text, as published: every combining mark dropped."""
    text = unicodedata.normalize("NFD", value)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return " ".join(re.sub(r"[^\w\s]+", " ", text).replace("_", " ").split())


def test_latin_greek_cyrillic_punctuation_and_symbols_normalize_as_published():
    blocks = [
        (0x0000, 0x058F), (0x1AB0, 0x1AFF), (0x1C80, 0x1C8F), (0x1D00, 0x1FFF), (0x2000, 0x2BFF),
        (0x2DE0, 0x2DFF), (0xA640, 0xA69F), (0xA720, 0xA7FF), (0xAB30, 0xAB6F), (0xFB00, 0xFB06),
        (0xFE20, 0xFE2F), (0xFF00, 0xFF65), (0x1E000, 0x1E02F),
    ]
    changed = [
        hex(code_point)
        for first, last in blocks
        for code_point in range(first, last + 1)
        if not 0xD800 <= code_point < 0xE000
        and any(
            normalize_text(text) != _published_normalization(text)
            for text in (chr(code_point), f"Ab{chr(code_point)}cD e{chr(code_point)} f")
        )
    ]
    assert changed == []
