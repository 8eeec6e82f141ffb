//! Streaming: encoding a text that arrives in chunks (`encode_iterable`), holding only
//! a small tail between chunks, to exactly the ids of encoding it whole.
//!
//! Each call encodes the part of the known text that later text cannot change and
//! returns how much it consumed; the caller keeps the rest and prepends it to the next
//! chunk.

use crate::model::{check_disallowed, EncodeError, Model};
use crate::pretok::SpecialMatcher;

/// Bytes of look-ahead a streamed unit needs before it is final (see
/// [`encode_prefix`]): a few UTF-8 characters' worth, with room to spare.
pub const STREAM_MARGIN: usize = 64;

/// Encodes the part of `text` that later text cannot change, after checking that
/// `text` holds none of the `disallowed` special tokens; `starts_text`: nothing of
/// the stream's text came before `text` ([`Model::encode_part_cached`]).
///
/// Returns the ids and the number of bytes consumed. With `last`, everything is
/// consumed. A unit is final when it ends at least a margin before the end of the
/// known text: the built-in patterns look at most a few characters past a piece (a
/// whitespace run that reaches the end of the text always ends its piece there), and a
/// special token is decided within its own length (and the whitespace an added token
/// may take, within its run: see [`SpecialMatcher::strippable_from`]).
pub fn encode_prefix<M: Model>(
    model: &M,
    text: &str,
    allowed: &SpecialMatcher,
    disallowed: &SpecialMatcher,
    starts_text: bool,
    last: bool,
) -> Result<(Vec<u32>, usize), EncodeError> {
    check_disallowed(text, disallowed)?;
    let mut ids = Vec::new();
    let consumed = model.with_cache(|cache| {
        if last {
            model.encode_part_cached(text, starts_text, allowed, cache, &mut ids)?;
            return Ok(text.len());
        }
        let margin = STREAM_MARGIN + 2 * allowed.max_len();
        let mut limit = text.len().saturating_sub(margin);
        // An lstrip token still to come takes the whitespace before it: the text
        // between tokens may end where that starts, so hold back a margin before it.
        let strippable = allowed.strippable_from(text.as_bytes());
        if strippable < text.len() {
            limit = limit.min(strippable.saturating_sub(margin));
        }
        model.encode_until(text, starts_text, allowed, limit, cache, &mut ids)
    })?;
    Ok((ids, consumed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::encoder::tests::minbpe_encoder;
    use crate::pretok::GPT2_PATTERN;

    #[test]
    fn streaming_prefix_plus_rest_equals_whole() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let none = e.no_specials();
        let text = "aaab aaab  ".repeat(20);
        let (ids, used) = encode_prefix(&e, &text, e.all_specials(), none, true, false).unwrap();
        assert!(used > 0 && used < text.len());
        let mut all = ids;
        all.extend(e.encode(&text[used..], e.all_specials()).unwrap());
        assert_eq!(all, e.encode(&text, e.all_specials()).unwrap());
        let (ids, used) = encode_prefix(&e, &text, e.all_specials(), none, true, true).unwrap();
        assert_eq!(
            (ids, used),
            (e.encode(&text, e.all_specials()).unwrap(), text.len())
        );
    }

    #[test]
    fn a_disallowed_special_token_is_an_error() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let err = encode_prefix(
            &e,
            "a <|e|>",
            e.no_specials(),
            e.all_specials(),
            true,
            false,
        );
        assert_eq!(
            err,
            Err(EncodeError::Disallowed {
                token: "<|e|>".into()
            })
        );
    }
}
