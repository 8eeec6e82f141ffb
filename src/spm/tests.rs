//! The merge loop, byte fallback, UNUSED pieces and decoding on tiny hand-made
//! vocabularies.

use super::chars::{AFTER_SPACE, BEFORE_SPACE};
use super::proto::{NormalizerSpec, TrainerSpec, BPE, UNIGRAM};
use super::wire::{Message, Value};
use super::*;

use PieceType::*;

/// A BPE model: `<unk>`, `<s>`, `</s>`, the 256 byte pieces when
/// `byte_fallback`, then `pieces`. The normalizer adds a dummy prefix and keeps
/// whitespace as is.
pub(super) fn model(pieces: &[(&str, f32, PieceType)], byte_fallback: bool) -> SpmModel {
    SpmModel::from_proto(proto(pieces, byte_fallback, BPE)).unwrap()
}

fn proto(pieces: &[(&str, f32, PieceType)], byte_fallback: bool, model_type: i32) -> ModelProto {
    let mut all = vec![
        Piece::new("<unk>", 0.0, Unknown),
        Piece::new("<s>", 0.0, Control),
        Piece::new("</s>", 0.0, Control),
    ];
    if byte_fallback {
        all.extend((0..=255u8).map(|b| Piece::new(&format!("<0x{b:02X}>"), 0.0, Byte)));
    }
    all.extend(
        pieces
            .iter()
            .map(|&(p, score, kind)| Piece::new(p, score, kind)),
    );
    let mut trainer = Message::default();
    trainer.set(3, Value::Varint(model_type as u64));
    trainer.set(35, Value::Varint(byte_fallback as u64));
    let mut normalizer = Message::default();
    normalizer.set(1, Value::Bytes(b"identity".to_vec()));
    normalizer.set(4, Value::Varint(0));
    ModelProto {
        pieces: all,
        trainer_spec: Some(TrainerSpec(trainer)),
        normalizer_spec: Some(NormalizerSpec(normalizer)),
        ..ModelProto::default()
    }
}

fn pieces_of(m: &SpmModel, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&id| m.entries[id as usize].piece.clone())
        .collect()
}

fn encode_pieces(m: &SpmModel, text: &str) -> Vec<String> {
    let ids = m.encode(text, false, false).unwrap();
    assert_eq!(
        ids,
        m.encode_uncached(text),
        "cached and whole-text encoding differ on {text:?}"
    );
    pieces_of(m, &ids)
}

const ABC: &[(&str, f32, PieceType)] = &[
    ("▁", -1.0, Normal),
    ("a", -2.0, Normal),
    ("b", -3.0, Normal),
    ("c", -4.0, Normal),
    ("ab", -5.0, Normal),
    ("bc", -6.0, Normal),
    ("aa", -7.0, Normal),
    ("▁a", -8.0, Normal),
];

#[test]
fn the_pair_with_the_highest_score_merges_first() {
    let m = model(ABC, false);
    // "ab" (-5) beats "bc" (-6) and "▁a" (-8); nothing then joins "ab".
    assert_eq!(encode_pieces(&m, "abc"), ["▁", "ab", "c"]);
}

#[test]
fn equal_scores_merge_the_leftmost_pair() {
    let m = model(
        &[
            ("▁", -1.0, Normal),
            ("x", -1.0, Normal),
            ("xx", -2.0, Normal),
        ],
        false,
    );
    assert_eq!(encode_pieces(&m, "xxx"), ["▁", "xx", "x"]);
}

#[test]
fn a_character_with_no_piece_falls_back_to_its_utf8_bytes() {
    let m = model(ABC, true);
    assert_eq!(encode_pieces(&m, "aé"), ["▁a", "<0xC3>", "<0xA9>"]);
}

#[test]
fn without_byte_fallback_a_run_of_unknown_characters_is_one_unk() {
    let m = model(ABC, false);
    assert_eq!(encode_pieces(&m, "aéè b"), ["▁a", "<unk>", "▁", "b"]);
    // Across words too: "é" then "▁"-less "è" in the next word is not adjacent.
    assert_eq!(encode_pieces(&m, "é è"), ["▁", "<unk>", "▁", "<unk>"]);
}

#[test]
fn a_final_unused_piece_is_split_back_into_what_it_was_made_of() {
    let vocab = [
        ("▁", -1.0, Normal),
        ("a", -2.0, Normal),
        ("b", -3.0, Normal),
        ("c", -4.0, Normal),
    ];
    let with = |extra: &[(&'static str, f32, PieceType)]| {
        let mut v = vocab.to_vec();
        v.extend_from_slice(extra);
        model(&v, false)
    };
    let m = with(&[("ab", -5.0, Unused)]);
    assert_eq!(encode_pieces(&m, "ab"), ["▁", "a", "b"]);
    // An UNUSED piece is still a step towards a used one.
    let m = with(&[("ab", -5.0, Unused), ("abc", -6.0, Normal)]);
    assert_eq!(encode_pieces(&m, "abc"), ["▁", "abc"]);
}

#[test]
fn user_defined_pieces_are_never_split_or_merged() {
    let mut v = ABC.to_vec();
    v.push(("<x>", 0.0, UserDefined));
    v.push(("a<", 10.0, Normal));
    let m = model(&v, true);
    assert_eq!(encode_pieces(&m, "a<x>b"), ["▁a", "<x>", "b"]);
}

#[test]
fn bos_and_eos_surround_the_ids_when_asked() {
    let m = model(ABC, false);
    let ids = m.encode("a", true, true).unwrap();
    assert_eq!(pieces_of(&m, &ids), ["<s>", "▁a", "</s>"]);
}

#[test]
fn empty_text_has_no_ids() {
    assert_eq!(
        model(ABC, true).encode("", false, false).unwrap(),
        Vec::<u32>::new()
    );
}

#[test]
fn words_are_cut_only_where_no_piece_crosses() {
    // "a▁" lets a merge cross "a|▁": the cut before that ▁ must not happen.
    let mut v = ABC.to_vec();
    v.push(("a▁", 5.0, Normal));
    let m = model(&v, true);
    assert!(m.chars.has('a', BEFORE_SPACE));
    assert_eq!(encode_pieces(&m, "ba ab"), ["▁", "b", "a▁", "ab"]);
}

#[test]
fn decode_drops_the_dummy_prefix_and_controls_and_joins_bytes() {
    let m = model(ABC, true);
    let ids = m.encode("ab é", true, true).unwrap();
    assert_eq!(m.decode(&ids).unwrap(), "ab é");
    let unk = m.piece_to_id("<unk>");
    assert_eq!(m.decode(&[unk]).unwrap(), " \u{2047} ");
}

#[test]
fn decode_writes_one_replacement_per_invalid_byte() {
    let m = model(ABC, true);
    let b = |x: u8| m.piece_to_id(&format!("<0x{x:02X}>"));
    // A truncated 3-byte character: two invalid bytes, two U+FFFD.
    assert_eq!(
        m.decode(&[b(0xE2), b(0x82), b(0x41)]).unwrap(),
        "\u{FFFD}\u{FFFD}A"
    );
}

#[test]
fn decode_of_an_unknown_id_is_an_error() {
    let m = model(ABC, false);
    assert!(matches!(m.decode(&[10_000]), Err(SpmError::OutOfRange(_))));
}

#[test]
fn a_unigram_model_is_refused_by_name() {
    let err = SpmModel::from_proto(proto(ABC, false, UNIGRAM)).unwrap_err();
    assert!(
        err.to_string().contains("Unigram models are not supported"),
        "{err}"
    );
}

#[test]
fn a_model_without_unk_or_with_half_its_bytes_is_invalid() {
    let mut p = proto(ABC, true, BPE);
    p.pieces.retain(|x| x.piece != "<0x7F>");
    assert!(matches!(SpmModel::from_proto(p), Err(SpmError::Invalid(_))));
    let mut p = proto(ABC, false, BPE);
    p.pieces.remove(0);
    assert!(matches!(SpmModel::from_proto(p), Err(SpmError::Invalid(_))));
}

#[test]
fn words_are_cut_where_the_whitespace_rule_says_and_nowhere_else() {
    let mut v = ABC.to_vec();
    v.extend([
        ("a▁", 5.0, Normal),
        ("▁▁", -0.5, Normal),
        ("▁é", -0.6, Normal),
    ]);
    let m = model(&v, true);
    // The rule, one pair of neighbouring characters at a time.
    let naive = |text: &str| {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut cuts = vec![0];
        for w in chars.windows(2) {
            let ((_, p), (i, c)) = (w[0], w[1]);
            if (c == m.space && !m.chars.has(p, BEFORE_SPACE))
                || (p == m.space && !m.chars.has(c, AFTER_SPACE))
            {
                cuts.push(i);
            }
        }
        cuts
    };
    for text in [
        "",
        "▁",
        "▁▁▁a▁b",
        "a▁b▁▁c",
        "ba▁▁é▁é",
        "é▁",
        "▁a▁",
        "xyz",
        "a▁▁▁▁b▁c▁",
        // Other characters that start with ▁'s first byte (E2 96 81), and a
        // text that ends in the middle of a would-be mark's bytes.
        "a—b▅▁c▂",
        "▁\u{2580}a▁",
    ] {
        let mut starts = Vec::new();
        m.for_each_word(text, None, |start, _| starts.push(start));
        let expected = if text.is_empty() { vec![] } else { naive(text) };
        assert_eq!(starts, expected, "{text:?}");
    }
}

#[test]
fn small_words_merge_as_the_heap_merges_them_ties_and_all() {
    let mut v = ABC.to_vec();
    // Equal scores everywhere: the leftmost pair must win in both loops.
    v.extend([
        ("ba", -5.0, Normal),
        ("ca", -5.0, Normal),
        ("abab", -5.0, Normal),
    ]);
    v.extend([
        ("cc", -5.0, Normal),
        ("ccc", -2.5, Normal),
        ("▁ab", 1.0, Normal),
    ]);
    let m = model(&v, true);
    let mut state = 12345u32;
    for len in 1..=16 {
        for _ in 0..200 {
            let text: String = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    ['a', 'b', 'c', '▁', 'x'][(state >> 16) as usize % 5]
                })
                .collect();
            let (small, heap) = m.merged_both_ways(&text);
            assert_eq!(small, heap, "{text:?}");
        }
    }
}

#[test]
fn words_merge_in_parts_cut_where_no_piece_joins_two_characters() {
    let m = model(ABC, true);
    // Inside pieces stand only a-b, b-c, a-a and ▁-a: every other two
    // neighbours are a cut.
    let word = "aabcbbcabcaabcccab".repeat(2);
    let parts = ["aabc", "b", "bc", "abc", "aabc", "c", "c", "ab"].repeat(2);
    assert_eq!(m.joined_parts(&word), Some(parts));
    assert_eq!(
        m.joined_parts("aabcb"),
        Some(vec!["aabc", "b"]),
        "short words are cut too"
    );
    assert_eq!(m.joined_parts(&"a".repeat(40)), None, "no cut in it");
    let texts = [
        word.clone(),
        format!("x {word}"),
        "c".repeat(40),
        format!("é{}é", "abc".repeat(12)),
    ];
    for t in &texts {
        encode_pieces(&m, t);
    }
}

#[test]
fn cached_words_match_whole_text_encoding_on_mixed_text() {
    let mut v = ABC.to_vec();
    v.extend([
        ("▁▁", -0.5, Normal),
        ("▁▁▁▁", -0.7, Normal),
        ("ca", -1.5, Normal),
    ]);
    let m = model(&v, true);
    let texts = [
        "",
        " ",
        "   ",
        "a  b",
        "abc cab  aab\tbb  ",
        "é a é",
        "  ab   ba    c",
        "a\u{2581}b",
    ];
    for t in texts {
        encode_pieces(&m, t);
    }
}

#[test]
fn long_runs_of_spaces_are_cached_and_long_words_have_a_byte_budget() {
    let mut v = ABC.to_vec();
    v.extend([("▁▁", -0.5, Normal), ("▁▁▁▁", -0.7, Normal)]);
    let m = model(&v, true);
    let text = format!("a{}c", " ".repeat(50));
    let mut cache = encode::WordCache::default();
    let ids = m.encode_with(&text, false, false, &mut cache).unwrap();
    assert_eq!(ids, m.encode_uncached(&text));
    // Words: the dummy prefix and "a", the 50 spaces, "c" (no piece has c
    // after ▁).
    let run = "▁".repeat(50);
    let run_ids = cache.cached(&run).expect("a 150-byte word is cached");
    assert_eq!(pieces_of(&m, &run_ids).concat(), run);

    let mut cache = encode::WordCache::default();
    let word = |i: usize| format!("{i:0width$}", width = encode::MAX_CACHED_WORD);
    let fill = encode::MAX_LONG_BYTES / encode::MAX_CACHED_WORD;
    for i in 0..fill {
        cache.put(&word(i), &[1]);
    }
    assert_eq!(cache.cached_words(), fill);
    cache.put(&word(fill), &[2]);
    assert_eq!(
        cache.cached_words(),
        1,
        "past the byte budget the cache starts over"
    );
    assert_eq!(cache.cached(&word(fill)), Some(vec![2]));
}

#[test]
fn a_small_loop_rank_orders_by_score_then_leftmost() {
    let scores = [
        f32::NEG_INFINITY,
        -1e9,
        -2.5,
        -1.0,
        -0.0,
        0.0,
        1e-30,
        3.0,
        f32::INFINITY,
    ];
    for &a in &scores {
        for &b in &scores {
            for (i, j) in [(0, 1), (1, 0), (3, 3), (0, 15)] {
                let want = a.total_cmp(&b).then(j.cmp(&i));
                let got = encode::rank(a, i).cmp(&encode::rank(b, j));
                assert_eq!(got, want, "({a}, {i}) vs ({b}, {j})");
            }
        }
        assert!(encode::rank(a, 15) > 0, "0 means no candidate");
    }
}

#[test]
fn the_word_cache_keeps_words_of_every_length_apart() {
    let mut cache = encode::WordCache::default();
    // Around the lengths where a word's key changes form (15 bytes packed, up
    // to 30 as two packed halves, longer as a string), and words that differ
    // only in their last byte or in where the halves meet.
    let mut words: Vec<String> = Vec::new();
    for len in [1, 14, 15, 16, 17, 29, 30, 31, 32, 64] {
        words.push("a".repeat(len));
        words.push(format!("{}b", "a".repeat(len - 1)));
        words.push(format!("b{}", "a".repeat(len - 1)));
    }
    words.push(format!("{}é{}", "a".repeat(14), "a".repeat(10)));
    words.push(format!("{}é{}", "a".repeat(13), "a".repeat(11)));
    words.sort();
    words.dedup();
    for (i, w) in words.iter().enumerate() {
        assert_eq!(cache.cached(w), None, "{w:?} before it is put");
        cache.put(w, &[i as u32, 7]);
    }
    for (i, w) in words.iter().enumerate() {
        assert_eq!(cache.cached(w), Some(vec![i as u32, 7]), "{w:?}");
    }
    assert_eq!(cache.cached_words(), words.len());
}
