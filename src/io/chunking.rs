//! Where text may be cut so that the parts can be pre-tokenized independently.
//!
//! A cut at byte offset `c` is *safe* when pre-tokenizing `text[..c]` and `text[c..]`
//! separately yields exactly the units of pre-tokenizing `text` whole. That is what
//! lets training read a file in blocks and count the blocks on several threads
//! while staying identical to a single pass over the whole file.
//!
//! Safe cuts:
//! - either edge of a special token (special tokens are hard boundaries by definition);
//! - for the built-in patterns only (the GPT ones and Llama 3's, Qwen2's, Qwen3.5's and
//!   Tekken's variants of them: [`crate::pretok::BUILTIN_PATTERNS`]), *newline cuts*: right
//!   after a `\n` that follows a *visible* character (printable ASCII, `!`..`~`, or any
//!   other character that is neither whitespace nor a control: [`visible`]) and
//!   precedes a letter or digit (ASCII, or any alphanumeric character). Under those
//!   patterns no piece can continue across that point: a letter, mark or digit piece
//!   never takes a newline as its prefix, the newline itself is matched alone or as the
//!   tail of the punctuation piece before it, and nothing before it reads past the
//!   letter/digit that follows;
//! - for the same patterns, *space cuts*: right before a space that follows a visible
//!   character (`one| two`, `слово| два`, `end.| Next`). Only a whitespace piece can
//!   hold a space after its first character, and one cannot start before a visible
//!   character and reach past it; every other piece takes a space only as its first
//!   character; and no pattern looks behind. So the space starts a piece, and the
//!   pieces before it are found the same whether the text goes on or ends there (what
//!   they look at past their end, a letter class, `[\r\n]*` or a contraction, rejects
//!   a space as it rejects the end). These make one long line of prose (no newline at
//!   all) cuttable like many short ones, in any script that puts spaces between words;
//! - for SentencePiece models whose pieces never hold the whitespace mark `▁` after
//!   another character (Llama 2's, Mistral's: only runs of `▁` hold it inside), *word
//!   cuts*: right before a space that follows a character other than a space or `▁`.
//!   The space becomes `▁`, and no merge joins it to the character before, so the
//!   parts merge as the whole does (the model says when this holds, and encodes a
//!   part after the first without the dummy prefix: [`crate::spm`]'s seam).
//!
//! (The newline and space rules are fuzzed against whole-text pre-tokenization in the
//! Python tests, for every built-in pattern; word cuts against sentencepiece and
//! `tokenizers`, `tests/test_spm_cuts.py`.) Custom patterns and "no pattern" are cut at special
//! tokens only; readers that need whole lines (SentencePiece training counts lines)
//! cut at newline cuts only.

use crate::pretok::SpecialMatcher;

/// Where, besides the edges of special tokens, a text may be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextCuts {
    /// Nowhere else (custom patterns, no pattern).
    None,
    /// At newline cuts only: every block ends at the end of a line.
    Newlines,
    /// At newline cuts and space cuts (the built-in patterns' pre-tokens).
    Pattern,
    /// At word cuts (SentencePiece models that allow them).
    Words,
}

impl TextCuts {
    /// The cuts that never change `pre`'s pieces: [`TextCuts::Pattern`] for the
    /// built-in patterns, else [`TextCuts::None`].
    pub fn of(pre: &crate::pretok::PreTokenizer) -> TextCuts {
        if pre.pattern_cuts_are_safe() {
            TextCuts::Pattern
        } else {
            TextCuts::None
        }
    }

    /// Is `c` a cut of this kind (besides special tokens)? Needs `buf[c-2..=c+1]`.
    pub fn at(self, buf: &[u8], c: usize) -> bool {
        match self {
            TextCuts::None => false,
            TextCuts::Newlines => is_newline_cut(buf, c),
            TextCuts::Pattern => is_newline_cut(buf, c) || is_space_cut(buf, c),
            TextCuts::Words => is_word_cut(buf, c),
        }
    }
}

/// The whitespace mark `▁` (U+2581) in UTF-8.
const MARK: &[u8] = "\u{2581}".as_bytes();

/// Is `c` a word cut (see the module docs)? Needs `buf[c-3..=c]`: a cut is not taken
/// within three bytes of the start of `buf`, where a `▁` before it may not be seen.
pub fn is_word_cut(buf: &[u8], c: usize) -> bool {
    c >= MARK.len()
        && c < buf.len()
        && buf[c] == b' '
        && buf[c - 1] != b' '
        && &buf[c - MARK.len()..c] != MARK
}

/// Is `c` a newline cut (see the module docs)? Needs the characters before and after
/// the newline (`buf[c-5..c+4]`, as far as `buf` goes).
pub fn is_newline_cut(buf: &[u8], c: usize) -> bool {
    c >= 2
        && c < buf.len()
        && buf[c - 1] == b'\n'
        && ends_visible(buf, c - 1)
        && starts_alphanumeric(buf, c)
}

/// Is `c` a space cut (see the module docs)? Needs the character before the space
/// and the byte after it (`buf[c-4..=c+1]`, as far as `buf` goes).
pub fn is_space_cut(buf: &[u8], c: usize) -> bool {
    c >= 1 && c + 1 < buf.len() && buf[c] == b' ' && ends_visible(buf, c)
}

/// Does `buf[..end]` end with a visible character ([`visible`])? False when the bytes
/// before `end` are not a whole UTF-8 character.
pub fn ends_visible(buf: &[u8], end: usize) -> bool {
    let Some(tail) = buf.get(end.saturating_sub(4)..end) else {
        return false;
    };
    // The last chunk's valid text ends at `end` unless the bytes there are not UTF-8.
    tail.utf8_chunks().last().is_some_and(|chunk| {
        chunk.invalid().is_empty() && chunk.valid().chars().next_back().is_some_and(visible)
    })
}

/// A character that is neither whitespace (Unicode's White_Space, which is `\s` to the
/// patterns' engines and the reference's) nor a control: in ASCII, `!`..`~`.
pub fn visible(ch: char) -> bool {
    !ch.is_whitespace() && !ch.is_control()
}

/// Does `buf[at..]` start with a letter or digit (a character Unicode calls alphabetic
/// or numeric)? False when the character is not whole in `buf`.
fn starts_alphanumeric(buf: &[u8], at: usize) -> bool {
    let Some(head) = buf.get(at..buf.len().min(at + 4)) else {
        return false;
    };
    let first = head
        .utf8_chunks()
        .next()
        .and_then(|c| c.valid().chars().next());
    first.is_some_and(char::is_alphanumeric)
}

/// The largest safe cut `c` with `lo < c <= hi`, if any.
///
/// `matches` are the matches of `specials` in `buf` ([`SpecialMatcher::find_all`]:
/// leftmost-longest, sorted, with the whitespace flagged tokens take), and `buf`
/// must start at a safe cut. A cut must also keep `specials`' single_word tokens as
/// the whole text has them ([`SpecialMatcher::cut_is_safe`]). The caller keeps `hi` at least the longest special
/// token's length before the end of the known text, so that every match up to `hi` is
/// final.
pub fn find_cut(
    buf: &[u8],
    lo: usize,
    hi: usize,
    matches: &[(usize, usize, usize)],
    cuts: TextCuts,
    specials: &SpecialMatcher,
) -> Option<usize> {
    if hi <= lo {
        return None;
    }
    let mut best: Option<usize> = None;
    // Special-token edges within (lo, hi].
    let first = matches.partition_point(|m| m.1 <= lo);
    for &(start, end, _) in &matches[first..] {
        if start > hi {
            break;
        }
        for edge in [start, end] {
            if edge > lo && edge <= hi && specials.cut_is_safe(buf, edge) {
                best = Some(best.map_or(edge, |b: usize| b.max(edge)));
            }
        }
    }
    if cuts != TextCuts::None {
        let floor = best.unwrap_or(lo);
        // Every text cut `c` has a newline at `c - 1` or a space at `c`: only those
        // bytes are looked at, found from `hi` down with memrchr. Looking at every
        // byte made planning a batch of text without ASCII spaces (Thai, Chinese,
        // Hindi), serial work before its threads start, a few percent of the batch.
        let end = (hi + 1).min(buf.len());
        if floor < end {
            for p in memchr::memrchr2_iter(b'\n', b' ', &buf[floor..end]).map(|i| floor + i) {
                let c = if buf[p] == b'\n' { p + 1 } else { p };
                if c > floor
                    && c <= hi
                    && cuts.at(buf, c)
                    && !inside_special(matches, c)
                    && specials.cut_is_safe(buf, c)
                {
                    return Some(c);
                }
            }
        }
    }
    best
}

/// [`find_cut`] from the start of `buf` to `hi`, with the matches of `specials` in
/// `buf` found here: the last place a reader or a stream may stop at.
pub fn last_cut(buf: &[u8], hi: usize, cuts: TextCuts, specials: &SpecialMatcher) -> Option<usize> {
    find_cut(buf, 0, hi, &specials.find_all(buf), cuts, specials)
}

/// Is `c` strictly inside one of the (sorted, non-overlapping) matches?
fn inside_special(matches: &[(usize, usize, usize)], c: usize) -> bool {
    let i = matches.partition_point(|m| m.1 <= c);
    i < matches.len() && matches[i].0 < c
}

/// Splits `buf[..len]` into at most `parts` pieces at safe cuts near equal sizes.
/// Returns the cut offsets, ending with `len`.
pub fn split_evenly(
    buf: &[u8],
    len: usize,
    parts: usize,
    matches: &[(usize, usize, usize)],
    text_cuts: TextCuts,
    specials: &SpecialMatcher,
) -> Vec<usize> {
    let mut cuts = Vec::with_capacity(parts);
    let mut prev = 0;
    for i in 1..parts {
        let target = len / parts * i;
        if target <= prev {
            continue;
        }
        if let Some(c) = find_cut(buf, prev, target, matches, text_cuts, specials) {
            if c < len {
                cuts.push(c);
                prev = c;
            }
        }
    }
    cuts.push(len);
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> SpecialMatcher {
        SpecialMatcher::new(&[]).unwrap()
    }

    #[test]
    fn newline_cut_needs_a_visible_character_before_and_an_alphanumeric_after() {
        assert!(is_newline_cut(b"a.\nb", 3));
        assert!(is_newline_cut("\u{3002}\n\u{4e2d}".as_bytes(), 4)); // 。\n中
        assert!(is_newline_cut("\u{0915}\n\u{0967}".as_bytes(), 4)); // क\n१
        assert!(!is_newline_cut(b"a \nb", 3)); // " \n" would merge into one piece
        assert!(!is_newline_cut("a\u{3000}\nb".as_bytes(), 5)); // nor "\u{3000}\n"
        assert!(!is_newline_cut(b"a.\n/", 3)); // o200k: ".\n/" is one piece
        assert!(!is_newline_cut("a.\n\u{300c}".as_bytes(), 3)); // punctuation after
        assert!(!is_newline_cut(b"a.\n", 3)); // nothing known after
        assert!(!is_newline_cut(&"a.\n\u{4e2d}".as_bytes()[..4], 3)); // half a character
    }

    #[test]
    fn space_cut_needs_a_visible_character_before() {
        assert!(is_space_cut(b"one two", 3));
        assert!(is_space_cut(b"one  two", 3)); // "one", " ", " two" either way
        assert!(is_space_cut(b"one. two", 4));
        assert!(is_space_cut(b"one 2", 3));
        assert!(is_space_cut("\u{0441}\u{043b} \u{0434}".as_bytes(), 4)); // сл д
        assert!(is_space_cut("\u{0915}\u{0947} x".as_bytes(), 6)); // a vowel sign (a mark)
        assert!(!is_space_cut(b"one  two", 4)); // a space before: "  two" is two pieces
        assert!(!is_space_cut(b"one\t two", 4));
        assert!(!is_space_cut("one\u{a0} two".as_bytes(), 5)); // no-break space
        assert!(!is_space_cut("one\u{85} two".as_bytes(), 5)); // a control (and \s)
        assert!(!is_space_cut(b"one\x1f two", 4)); // a control (\s to Python's str)
        assert!(!is_space_cut(b"one ", 3)); // nothing known after
        assert!(!is_space_cut(b" two", 0));
    }

    #[test]
    fn a_line_without_newlines_is_cut_at_spaces_unless_only_lines_are_wanted() {
        let buf = b"one two three four";
        assert_eq!(
            find_cut(buf, 0, 12, &[], TextCuts::Pattern, &none()),
            Some(7)
        );
        assert_eq!(find_cut(buf, 0, 12, &[], TextCuts::Newlines, &none()), None);
        let inside = vec![(2, 10, 0)]; // a special token "e two th"
        assert_eq!(
            find_cut(buf, 0, 9, &inside, TextCuts::Pattern, &none()),
            Some(2)
        );
    }

    #[test]
    fn cut_prefers_the_latest_safe_point() {
        let buf = b"ab\ncd\nef<|x|>gh";
        let matches = vec![(8, 13, 0)];
        assert_eq!(
            find_cut(buf, 0, 7, &matches, TextCuts::Pattern, &none()),
            Some(6)
        );
        assert_eq!(
            find_cut(buf, 0, 14, &matches, TextCuts::Pattern, &none()),
            Some(13)
        );
        assert_eq!(find_cut(buf, 0, 7, &matches, TextCuts::None, &none()), None);
        assert_eq!(
            find_cut(buf, 0, 10, &matches, TextCuts::None, &none()),
            Some(8)
        );
    }

    #[test]
    fn never_cuts_inside_a_special_token() {
        let buf = b"x<|a\nb|>y";
        let matches = vec![(1, 8, 0)];
        assert_eq!(
            find_cut(buf, 0, 6, &matches, TextCuts::Pattern, &none()),
            Some(1)
        );
    }

    /// [`find_cut`]'s text cuts as it found them before, looking at every byte from
    /// `hi` down: the oracle of the memrchr scan.
    fn find_cut_byte_by_byte(
        buf: &[u8],
        lo: usize,
        hi: usize,
        matches: &[(usize, usize, usize)],
        cuts: TextCuts,
    ) -> Option<usize> {
        let edges = find_cut(buf, lo, hi, matches, TextCuts::None, &none());
        let floor = edges.unwrap_or(lo);
        (floor + 1..=hi)
            .rev()
            .find(|&c| cuts.at(buf, c) && !inside_special(matches, c))
            .or(edges)
    }

    #[test]
    fn the_scan_for_text_cuts_finds_the_cut_looking_at_every_byte_finds() {
        // Texts of spaces, newlines, punctuation, letters, digits and non-ASCII
        // letters (no ASCII space for long stretches), every window.
        let alphabet: [&[u8]; 10] = [
            b" ",
            b"\n",
            b"a",
            b"B",
            b"7",
            b".",
            b"\xe0\xb8\x81",
            b"  ",
            b"\n\n",
            "\u{2581}".as_bytes(),
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..300 {
            let len = (next() % 60) as usize;
            let buf: Vec<u8> = (0..len)
                .flat_map(|_| alphabet[next() as usize % alphabet.len()].iter().copied())
                .collect();
            let n = buf.len();
            let matches = if n > 6 && next() % 2 == 0 {
                let start = (next() as usize) % (n - 4);
                vec![(start, start + 3, 0)]
            } else {
                vec![]
            };
            for lo in 0..=n {
                for hi in lo..=n + 2 {
                    let kinds = [
                        TextCuts::Pattern,
                        TextCuts::Newlines,
                        TextCuts::Words,
                        TextCuts::None,
                    ];
                    for cuts in kinds {
                        assert_eq!(
                            find_cut(&buf, lo, hi, &matches, cuts, &none()),
                            find_cut_byte_by_byte(&buf, lo, hi, &matches, cuts),
                            "{:?} lo {lo} hi {hi} {cuts:?} {matches:?}",
                            String::from_utf8_lossy(&buf)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_word_cut_is_before_a_space_after_neither_a_space_nor_the_mark() {
        let cuts = |text: &str| -> Vec<usize> {
            let buf = text.as_bytes();
            (0..=buf.len()).filter(|&c| is_word_cut(buf, c)).collect()
        };
        assert_eq!(cuts("abc def"), vec![3]);
        assert_eq!(cuts("abc  def"), vec![3]); // not between two spaces
        assert_eq!(cuts("ab\u{2581} d"), Vec::<usize>::new()); // not after the mark
        assert_eq!(cuts("ab\n c 1 !"), vec![3, 5, 7]);
        assert_eq!(cuts("abcé ü"), vec![5]);
        assert_eq!(cuts("ab c"), Vec::<usize>::new()); // too near the start to see a mark
        assert_eq!(cuts("abc "), vec![3]);
    }

    #[test]
    fn split_evenly_ends_at_len() {
        let buf = b"aa.\nbb.\ncc.\ndd";
        let cuts = split_evenly(buf, buf.len(), 3, &[], TextCuts::Pattern, &none());
        assert_eq!(*cuts.last().unwrap(), buf.len());
        assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        assert!(cuts.len() > 1);
    }
}
