from dedup_assets.core.text import document_shingles, normalize_text, token_shingles


def test_spec_unicode_example():
    assert normalize_text("  Café—RÉSUMÉ_数据  ") == "cafe resume 数据"


def test_punctuation_underscore_and_whitespace_become_single_spaces():
    assert normalize_text("a,b;\tc__d\n\n e!!!") == "a b c d e"


def test_full_width_punctuation_splits_cjk_tokens():
    assert normalize_text("数据，处理。完成！") == "数据 处理 完成"


def test_none_and_blank_normalize_to_empty():
    assert normalize_text(None) == ""
    assert normalize_text(" \u3000 \n") == ""


def test_shingles_keep_token_order():
    tokens = "a b c d e f".split()
    assert token_shingles(tokens, 5) == {"a b c d e", "b c d e f"}
    assert token_shingles(list(reversed(tokens)), 5) == {"f e d c b", "e d c b a"}


def test_short_document_is_one_whole_shingle_and_empty_has_none():
    assert token_shingles(["only", "three", "tokens"], 5) == {"only three tokens"}
    assert token_shingles([], 5) == set()


def test_document_shingles_normalizes_first():
    assert document_shingles("Café RÉSUMÉ", 5) == document_shingles("cafe resume", 5) == {"cafe resume"}
