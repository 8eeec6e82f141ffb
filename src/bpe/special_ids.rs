//! Special-token ids, given in one place for every way a BPE model is built: the
//! CS336 constructor (`Tokenizer(vocab, merges, special_tokens)`), a `.tiktoken` file
//! (`io::tiktoken::load`) and `with_special_tokens`.
//!
//! A special token given with an id keeps it. One given without an id gets, by the
//! rule the caller names ([`Unnumbered`]), the id of the ordinary token with its own
//! bytes (the CS336 contract: `<|endoftext|>` already in a trained vocabulary) or the
//! next id after every id seen so far (a new token added to a finished vocabulary,
//! as Hugging Face's `add_special_tokens` does for a token it does not know).

use rustc_hash::FxHashMap;

/// What a special token given without an id gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unnumbered {
    /// The id of the ordinary token with the same bytes, else the next free id.
    SameBytesOrNext,
    /// The next free id.
    Next,
}

/// Why [`assign_special_ids`] gave no ids.
#[derive(Debug, PartialEq, Eq)]
pub enum SpecialIdError {
    /// `special`'s id already holds other bytes (an ordinary token's or another
    /// special's).
    Taken {
        special: String,
        id: u32,
        holder: Vec<u8>,
    },
    /// Every id up to `u32::MAX` is taken.
    NoIdLeft { special: String },
}

/// Ids for `specials` in the order given, a repeated token skipped (its first id
/// counts). `token_at` holds the ordinary tokens by id. A special may share the id of
/// the ordinary token with its own bytes; any other holder of its id is an error.
///
/// `[("<|end|>", None)]` over tokens 0..=257 -> `[("<|end|>", 258)]`.
pub fn assign_special_ids(
    token_at: &FxHashMap<u32, &[u8]>,
    specials: &[(String, Option<u32>)],
    unnumbered: Unnumbered,
) -> Result<Vec<(String, u32)>, SpecialIdError> {
    let mut id_of_bytes: Option<FxHashMap<&[u8], u32>> = None;
    let mut special_at: FxHashMap<u32, &str> = FxHashMap::default();
    let mut next = token_at.keys().max().map_or(0, |&m| m as u64 + 1);
    // Tokens with ids come first in `next`: a later unnumbered one must not take them.
    for &(_, id) in specials {
        if let Some(id) = id {
            next = next.max(id as u64 + 1);
        }
    }
    let mut assigned: Vec<(String, u32)> = Vec::with_capacity(specials.len());
    for (name, id) in specials {
        if assigned.iter().any(|(s, _)| s == name) {
            continue;
        }
        let mut same_bytes = || {
            // The lowest id wins where bytes repeat (training can make them twice).
            let map = id_of_bytes.get_or_insert_with(|| {
                let mut m = FxHashMap::default();
                for (&i, &t) in token_at {
                    m.entry(t)
                        .and_modify(|l: &mut u32| *l = (*l).min(i))
                        .or_insert(i);
                }
                m
            });
            map.get(name.as_bytes()).copied()
        };
        let id = match (id, unnumbered) {
            (Some(id), _) => *id,
            (None, Unnumbered::SameBytesOrNext) => match same_bytes() {
                Some(id) => id,
                None => fresh(&mut next, name)?,
            },
            (None, Unnumbered::Next) => fresh(&mut next, name)?,
        };
        let holder = token_at
            .get(&id)
            .copied()
            .or_else(|| special_at.get(&id).map(|s| s.as_bytes()));
        if let Some(holder) = holder.filter(|&h| h != name.as_bytes()) {
            return Err(SpecialIdError::Taken {
                special: name.clone(),
                id,
                holder: holder.to_vec(),
            });
        }
        special_at.insert(id, name);
        next = next.max(id as u64 + 1);
        assigned.push((name.clone(), id));
    }
    Ok(assigned)
}

/// The next free id (and moves `next` past it).
fn fresh(next: &mut u64, name: &str) -> Result<u32, SpecialIdError> {
    let id = u32::try_from(*next).map_err(|_| SpecialIdError::NoIdLeft {
        special: name.to_string(),
    })?;
    *next += 1;
    Ok(id)
}

impl SpecialIdError {
    /// The message, quoting text and bytes with the given functions.
    pub fn message(
        &self,
        text: &dyn Fn(&str) -> String,
        bytes: &dyn Fn(&[u8]) -> String,
    ) -> String {
        match self {
            SpecialIdError::Taken {
                special,
                id,
                holder,
            } => format!(
                "special token {} has id {id}, which the vocabulary gives to {}",
                text(special),
                bytes(holder)
            ),
            SpecialIdError::NoIdLeft { special } => {
                format!("no id left for special token {}", text(special))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> FxHashMap<u32, &'static [u8]> {
        [(0, &b"a"[..]), (1, b"b"), (2, b"ab"), (5, b"<|end|>")]
            .into_iter()
            .collect()
    }

    fn items(list: &[(&str, Option<u32>)]) -> Vec<(String, Option<u32>)> {
        list.iter().map(|&(s, i)| (s.to_string(), i)).collect()
    }

    fn ids(list: &[(&str, Option<u32>)], rule: Unnumbered) -> Result<Vec<u32>, SpecialIdError> {
        let out = assign_special_ids(&tokens(), &items(list), rule)?;
        Ok(out.into_iter().map(|(_, i)| i).collect())
    }

    #[test]
    fn an_unnumbered_token_takes_its_bytes_id_or_the_next_free_one() {
        let rule = Unnumbered::SameBytesOrNext;
        assert_eq!(
            ids(&[("<|end|>", None), ("<|pad|>", None)], rule),
            Ok(vec![5, 6])
        );
        // Next: a new id even where the bytes are an ordinary token's.
        assert_eq!(ids(&[("<|end|>", None)], Unnumbered::Next), Ok(vec![6]));
    }

    #[test]
    fn numbered_tokens_are_kept_and_unnumbered_ones_go_after_them() {
        let list = [("<|pad|>", None), ("<|x|>", Some(9))];
        assert_eq!(ids(&list, Unnumbered::Next), Ok(vec![10, 9]));
        // A repeated token: the first one counts.
        let list = [("<|x|>", Some(9)), ("<|x|>", Some(3))];
        assert_eq!(ids(&list, Unnumbered::Next), Ok(vec![9]));
    }

    #[test]
    fn an_id_holding_other_bytes_is_refused() {
        let e = ids(&[("<|x|>", Some(2))], Unnumbered::Next).unwrap_err();
        assert_eq!(
            e.message(&|s| format!("{s:?}"), &|b| format!("{b:?}")),
            "special token \"<|x|>\" has id 2, which the vocabulary gives to [97, 98]"
        );
        let e = ids(&[("<|x|>", Some(7)), ("<|y|>", Some(7))], Unnumbered::Next).unwrap_err();
        assert!(matches!(e, SpecialIdError::Taken { id: 7, .. }));
    }

    #[test]
    fn no_id_past_u32_max() {
        let e = ids(
            &[("<|x|>", Some(u32::MAX)), ("<|y|>", None)],
            Unnumbered::Next,
        );
        assert_eq!(
            e,
            Err(SpecialIdError::NoIdLeft {
                special: "<|y|>".into()
            })
        );
    }
}
