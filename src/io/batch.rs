//! Encoding many texts at once on several threads (`encode_batch`).
//!
//! Workers take texts in turn (an atomic counter), each with its own cache kept across
//! its texts (warm from earlier calls), and send `(index, ids)` back; the calling
//! thread receives finished texts as they come, so that what it does with them
//! (building Python lists, copying into one flat buffer) overlaps the encoding instead
//! of following it.
//!
//! Each text is first checked for disallowed special tokens, on its worker. A failing
//! text stops the workers from taking new texts; every text before it was already
//! taken, so the error reported is always that of the first failing text, whatever the
//! timing.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::model::{check_disallowed, EncodeError, Model};
use crate::pretok::SpecialMatcher;

/// Bytes of text one thread encodes between handing results over (see `encode_each`).
const GROUP_BYTES: usize = 1 << 16;

/// A finished text: its index, and its ids or why it failed.
pub type Done = (usize, Result<Vec<u32>, EncodeError>);

/// Why a batch failed: a text did not encode (the first such text), or the receiver
/// gave up.
#[derive(Debug)]
pub enum BatchError<E> {
    Encode(EncodeError),
    Receive(E),
}

/// The special tokens of a batch: `allowed` are encoded as specials; finding any of
/// `disallowed` in a text is an error.
#[derive(Clone, Copy)]
pub struct Specials<'a> {
    pub allowed: &'a SpecialMatcher,
    pub disallowed: &'a SpecialMatcher,
}

/// Checks one text and appends its ids to `out`.
fn encode_into<M: Model>(
    model: &M,
    text: &str,
    specials: Specials,
    cache: &mut M::Cache,
    out: &mut Vec<u32>,
) -> Result<(), EncodeError> {
    check_disallowed(text, specials.disallowed)?;
    model.encode_cached(text, specials.allowed, cache, out)
}

/// Encodes every text on `threads` threads; `receive(index, ids)` runs on the calling
/// thread for each text as it finishes, in any order. Every wait for the next finished
/// text goes through `wait(next)`, which must call `next` and return its result (the
/// bindings release the GIL there); with one thread, `next` encodes a group of texts
/// itself (and returns None), whose results are then received in order.
pub fn encode_each<M: Model, E>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    threads: usize,
    mut wait: impl FnMut(&mut (dyn FnMut() -> Option<Done> + Send)) -> Option<Done>,
    mut receive: impl FnMut(usize, &[u32]) -> Result<(), E>,
) -> Result<(), BatchError<E>> {
    let workers = threads.max(1).min(texts.len());
    if workers <= 1 {
        // One thread: texts are encoded a group at a time inside one `wait` (without
        // the GIL), then received. One `wait` per text cost more than encoding a short
        // text (a line of a SentencePiece corpus) itself. A group's ids go into one
        // buffer, kept from group to group: a vector per text was a malloc and a free
        // per line, and a realloc whenever a line had more ids than guessed.
        return model.with_cache(|cache| {
            let mut flat: Vec<u32> = Vec::new();
            let mut ends: Vec<usize> = Vec::new();
            let mut start = 0;
            while start < texts.len() {
                let mut end = start + 1;
                let mut bytes = texts[start].len();
                while end < texts.len() && bytes + texts[end].len() <= GROUP_BYTES {
                    bytes += texts[end].len();
                    end += 1;
                }
                flat.clear();
                ends.clear();
                let mut failure = None;
                wait(&mut || {
                    for &text in &texts[start..end] {
                        if let Err(e) = encode_into(model, text, specials, cache, &mut flat) {
                            failure = Some(e); // the texts after it are never received
                            break;
                        }
                        ends.push(flat.len());
                    }
                    None
                });
                let mut from = 0;
                for (k, &to) in ends.iter().enumerate() {
                    receive(start + k, &flat[from..to]).map_err(BatchError::Receive)?;
                    from = to;
                }
                if let Some(e) = failure {
                    return Err(BatchError::Encode(e));
                }
                start = end;
            }
            Ok(())
        });
    }
    let taken = &AtomicUsize::new(0);
    let stop = || taken.store(texts.len(), Ordering::Relaxed);
    std::thread::scope(|s| {
        let (tx, mut rx) = mpsc::channel::<Done>();
        for _ in 0..workers {
            let tx = tx.clone();
            s.spawn(move || {
                model.with_cache(|cache| loop {
                    let i = taken.fetch_add(1, Ordering::Relaxed);
                    if i >= texts.len() {
                        break;
                    }
                    let mut ids = Vec::with_capacity(texts[i].len() / 3);
                    let ids = encode_into(model, texts[i], specials, cache, &mut ids).map(|()| ids);
                    if ids.is_err() {
                        stop();
                    }
                    if tx.send((i, ids)).is_err() {
                        break;
                    }
                })
            });
        }
        drop(tx);
        let rx = &mut rx;
        let mut next = move || rx.recv().ok();
        let mut first_failure: Option<(usize, EncodeError)> = None;
        let mut refused = None;
        while let Some((i, ids)) = wait(&mut next) {
            match ids {
                Err(e) => {
                    if first_failure.as_ref().is_none_or(|f| i < f.0) {
                        first_failure = Some((i, e));
                    }
                }
                Ok(ids) if first_failure.is_none() && refused.is_none() => {
                    if let Err(e) = receive(i, &ids) {
                        stop();
                        refused = Some(e);
                    }
                }
                Ok(_) => {} // failed already: only draining the workers
            }
        }
        match (first_failure, refused) {
            (Some((_, e)), _) => Err(BatchError::Encode(e)),
            (None, Some(e)) => Err(BatchError::Receive(e)),
            (None, None) => Ok(()),
        }
    })
}

/// Writes `ids` into `dst` (4 bytes each) as little-endian uint32.
pub fn put_le(dst: &mut [u8], ids: &[u32]) {
    for (d, id) in dst.chunks_exact_mut(4).zip(ids) {
        d.copy_from_slice(&id.to_le_bytes());
    }
}

/// Encodes every text like [`encode_each`] and writes all their ids, in text order,
/// one after another into `out` as little-endian uint32. Returns the `texts.len() + 1`
/// offsets (in ids) where each text's ids start and the last ends.
///
/// `out` must hold 4 bytes per byte of text (a token has at least one byte). It may be
/// uninitialised: only the bytes before the last offset are written, so pages never
/// written cost no memory, and nothing is reallocated while the workers run (moving a
/// large buffer unmaps pages, which interrupts the other cores to flush their TLBs).
/// Finished texts that come early wait until the texts before them are placed.
pub fn encode_flat<M: Model>(
    model: &M,
    texts: &[&str],
    specials: Specials,
    threads: usize,
    out: &mut [MaybeUninit<u8>],
) -> Result<Vec<u64>, EncodeError> {
    let most_ids: usize = texts.iter().map(|t| model.most_ids(t)).sum();
    assert!(
        out.len() >= most_ids * 4,
        "the output holds 4 bytes per id the model may give"
    );
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0u64);
    let mut early: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    // Writes the ids of the next text in order after those written.
    fn place(out: &mut [MaybeUninit<u8>], offsets: &mut Vec<u64>, ids: &[u32]) {
        let written = *offsets.last().expect("offsets start with 0") as usize;
        let dst = &mut out[written * 4..(written + ids.len()) * 4];
        for (d, id) in dst.chunks_exact_mut(4).zip(ids) {
            for (d, b) in d.iter_mut().zip(id.to_le_bytes()) {
                d.write(b);
            }
        }
        offsets.push((written + ids.len()) as u64);
    }
    let placed = encode_each(
        model,
        texts,
        specials,
        threads,
        |next| next(),
        |i, ids| {
            if i + 1 != offsets.len() {
                early.insert(i, ids.to_vec()); // a text before it is still being encoded
                return Ok(());
            }
            place(out, &mut offsets, ids);
            while let Some(ids) = early.remove(&(offsets.len() - 1)) {
                place(out, &mut offsets, &ids);
            }
            Ok::<(), std::convert::Infallible>(())
        },
    );
    match placed {
        Ok(()) => Ok(offsets),
        Err(BatchError::Encode(e)) => Err(e),
        Err(BatchError::Receive(never)) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpe::encoder::tests::minbpe_encoder;
    use crate::pretok::GPT2_PATTERN;

    fn texts() -> Vec<String> {
        (0..200)
            .map(|i| "aaab daaab ".repeat(i % 7) + &"ac ".repeat(i % 3))
            .collect()
    }

    #[test]
    fn flat_output_is_every_text_in_order_whatever_the_threads() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts = texts();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = Specials {
            allowed: e.all_specials(),
            disallowed: e.no_specials(),
        };
        let want: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| e.encode(t, e.all_specials()).unwrap())
            .collect();
        for threads in [1, 2, 5] {
            let bytes: usize = texts.iter().map(|t| t.len()).sum();
            let mut out = vec![MaybeUninit::new(0u8); bytes * 4];
            let offsets = encode_flat(&e, &texts, specials, threads, &mut out).unwrap();
            assert_eq!(offsets.len(), texts.len() + 1);
            // SAFETY: every byte was initialised above.
            let bytes: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
            let ids: Vec<u32> = bytes[..*offsets.last().unwrap() as usize * 4]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            for (i, w) in want.iter().enumerate() {
                assert_eq!(&ids[offsets[i] as usize..offsets[i + 1] as usize], w);
            }
        }
    }

    #[test]
    fn the_first_text_with_a_disallowed_token_is_the_error() {
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let mut texts = texts();
        texts[150] += "<|e|>";
        texts[40] += "x<|e|>";
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = Specials {
            allowed: e.no_specials(),
            disallowed: e.all_specials(),
        };
        for threads in [1, 3] {
            let mut got = Vec::new();
            let result = encode_each(
                &e,
                &texts,
                specials,
                threads,
                |next| next(),
                |i, _| {
                    got.push(i);
                    Ok::<(), ()>(())
                },
            );
            assert!(matches!(
                result,
                Err(BatchError::Encode(EncodeError::Disallowed { ref token })) if token == "<|e|>"
            ));
            assert!(got.iter().all(|&i| i != 40 && i != 150));
            if threads == 1 {
                // In order, every text before the failing one, none after it.
                assert_eq!(got, (0..40).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn one_thread_receives_each_text_alone_across_groups() {
        // Over three groups' worth of text, so the kept buffer is reused.
        let e = minbpe_encoder(Some(GPT2_PATTERN));
        let texts: Vec<String> = (0..3 * GROUP_BYTES / 40)
            .map(|i| "aaab daaab ".repeat(i % 5) + &"ac ".repeat(i % 4))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let specials = Specials {
            allowed: e.all_specials(),
            disallowed: e.no_specials(),
        };
        let mut got = Vec::new();
        encode_each(
            &e,
            &texts,
            specials,
            1,
            |next| next(),
            |i, ids| {
                got.push((i, ids.to_vec()));
                Ok::<(), ()>(())
            },
        )
        .unwrap();
        let want: Vec<(usize, Vec<u32>)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i, e.encode(t, e.all_specials()).unwrap()))
            .collect();
        assert_eq!(got, want);
    }
}
