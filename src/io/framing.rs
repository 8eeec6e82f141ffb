//! Framing a batch of encoded items for a shard folder (`shards/writer.py`): the
//! ids `before` ahead of each item that begins a document and `after` behind each that
//! ends one, written as little-endian ids of the shards' width. The writer does the
//! rest of its bookkeeping per item, in Python; this is its one loop over tokens.

/// A batch's ids, framed and at the shards' width, with each item's new length.
pub struct Framed {
    /// Little-endian ids of `width` bytes; None when they would equal the input's
    /// bytes (nothing to frame and the same width): the caller keeps its own.
    pub ids: Option<Vec<u8>>,
    /// Each item's length in ids, frame included.
    pub lengths: Vec<u64>,
}

/// A batch of encoded items: item `k` is the ids `ids[offsets[k]..offsets[k + 1]]`
/// (little-endian, `id_width` bytes each: 2 or 4; `offsets` little-endian int64);
/// `firsts[k]` / `lasts[k]` (0 or 1) say whether it begins / ends its document.
pub struct Items<'a> {
    pub ids: &'a [u8],
    pub id_width: usize,
    pub offsets: &'a [u8],
    pub firsts: &'a [u8],
    pub lasts: &'a [u8],
}

/// Frames a batch of items with `before` and `after` (see the module doc), as ids of
/// `width` bytes (2 or 4). An error names what is wrong: offsets out of order or past
/// the ids, or an id too large for `width`.
pub fn frame_items(
    items: &Items<'_>,
    before: &[u32],
    after: &[u32],
    width: usize,
) -> Result<Framed, String> {
    let Items {
        ids,
        id_width: in_width,
        offsets,
        firsts,
        lasts,
    } = *items;
    for w in [in_width, width] {
        if w != 2 && w != 4 {
            return Err(format!("ids must be 2 or 4 bytes wide, not {w}"));
        }
    }
    if !ids.len().is_multiple_of(in_width) || !offsets.len().is_multiple_of(8) {
        return Err("ids or offsets end in the middle of a value".into());
    }
    let items = firsts.len();
    if lasts.len() != items || offsets.len() / 8 != items + 1 {
        return Err(format!(
            "{items} items need {} offsets and {items} lasts, not {} and {}",
            items + 1,
            offsets.len() / 8,
            lasts.len()
        ));
    }
    let n_ids = (ids.len() / in_width) as u64;
    let bounds: Vec<u64> = offsets
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    if bounds[0] != 0 || bounds[items] > n_ids || bounds.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!(
            "offsets must rise from 0 to at most the {n_ids} ids, one per item boundary"
        ));
    }
    let framing = |k: usize| {
        let head = if firsts[k] != 0 { before.len() } else { 0 };
        let tail = if lasts[k] != 0 { after.len() } else { 0 };
        (head, tail)
    };
    let lengths: Vec<u64> = (0..items)
        .map(|k| {
            let (head, tail) = framing(k);
            bounds[k + 1] - bounds[k] + (head + tail) as u64
        })
        .collect();
    let framed_any = (0..items).any(|k| framing(k) != (0, 0));
    if !framed_any && in_width == width && bounds[items] == n_ids {
        return Ok(Framed { ids: None, lengths });
    }
    let total: u64 = lengths.iter().sum();
    let mut out = Vec::with_capacity(total as usize * width);
    let put = |out: &mut Vec<u8>, id: u32| -> Result<(), String> {
        if width == 2 {
            let narrow = u16::try_from(id)
                .map_err(|_| format!("id {id} does not fit the shards' 2-byte ids"))?;
            out.extend_from_slice(&narrow.to_le_bytes());
        } else {
            out.extend_from_slice(&id.to_le_bytes());
        }
        Ok(())
    };
    for k in 0..items {
        let (head, tail) = framing(k);
        for &id in &before[..head] {
            put(&mut out, id)?;
        }
        let text = &ids[bounds[k] as usize * in_width..bounds[k + 1] as usize * in_width];
        if in_width == width {
            out.extend_from_slice(text);
        } else if in_width == 2 {
            for b in text.chunks_exact(2) {
                put(&mut out, u16::from_le_bytes([b[0], b[1]]) as u32)?;
            }
        } else {
            for b in text.chunks_exact(4) {
                put(&mut out, u32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
            }
        }
        for &id in &after[..tail] {
            put(&mut out, id)?;
        }
    }
    Ok(Framed {
        ids: Some(out),
        lengths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(ids: &[u32], width: usize) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| id.to_le_bytes()[..width].to_vec())
            .collect()
    }

    fn offsets(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn frame(
        ids: &[u8],
        id_width: usize,
        bounds: &[u64],
        firsts: &[u8],
        lasts: &[u8],
        before: &[u32],
        after: &[u32],
        width: usize,
    ) -> Result<Framed, String> {
        let offsets = offsets(bounds);
        let items = Items {
            ids,
            id_width,
            offsets: &offsets,
            firsts,
            lasts,
        };
        frame_items(&items, before, after, width)
    }

    fn ids_of(bytes: &[u8], width: usize) -> Vec<u32> {
        bytes
            .chunks_exact(width)
            .map(|b| {
                let mut four = [0u8; 4];
                four[..width].copy_from_slice(b);
                u32::from_le_bytes(four)
            })
            .collect()
    }

    #[test]
    fn each_document_gets_its_frame_once_across_its_parts() {
        // Items: a whole document [5, 6]; an empty one; then [7] and [8, 9], the two
        // parts of one document.
        let ids = le(&[5, 6, 7, 8, 9], 4);
        let got = frame(
            &ids,
            4,
            &[0, 2, 2, 3, 5],
            &[1, 1, 1, 0],
            &[1, 1, 0, 1],
            &[1],
            &[0, 3],
            2,
        )
        .unwrap();
        let out = got.ids.unwrap();
        assert_eq!(ids_of(&out, 2), [1, 5, 6, 0, 3, 1, 0, 3, 1, 7, 8, 9, 0, 3]);
        assert_eq!(got.lengths, [5, 3, 2, 4]);
    }

    #[test]
    fn nothing_to_frame_at_the_same_width_gives_the_ids_back_untouched() {
        let ids = le(&[5, 6, 7], 2);
        let got = frame(&ids, 2, &[0, 2, 3], &[1, 1], &[1, 1], &[], &[], 2);
        let got = got.unwrap();
        assert!(got.ids.is_none());
        assert_eq!(got.lengths, [2, 1]);
        // Items inside a document take no frame: nothing to do either.
        let mid = frame(&ids, 2, &[0, 2, 3], &[0, 0], &[0, 0], &[1], &[2], 2);
        assert!(mid.unwrap().ids.is_none());
        // Another width, or offsets short of the ids: a new buffer.
        let wide = frame(&ids, 2, &[0, 2, 3], &[1, 1], &[1, 1], &[], &[], 4);
        assert_eq!(ids_of(&wide.unwrap().ids.unwrap(), 4), [5, 6, 7]);
        let short = frame(&ids, 2, &[0, 2], &[1], &[1], &[], &[], 2);
        assert_eq!(ids_of(&short.unwrap().ids.unwrap(), 2), [5, 6]);
    }

    #[test]
    fn bad_input_is_an_error_that_names_it() {
        let ids = le(&[5, 70_000], 4);
        let too_big = frame(&ids, 4, &[0, 2], &[1], &[1], &[], &[], 2);
        assert_eq!(
            too_big.err().unwrap(),
            "id 70000 does not fit the shards' 2-byte ids"
        );
        let past = frame(&ids, 4, &[0, 3], &[1], &[1], &[], &[], 4);
        assert!(past.err().unwrap().contains("offsets must rise"));
        let falling = frame(&ids, 4, &[0, 2, 1], &[1, 1], &[1, 1], &[], &[], 4);
        assert!(falling.err().unwrap().contains("offsets must rise"));
        let short = frame(&ids, 4, &[0, 2], &[1, 1], &[1, 1], &[], &[], 4);
        assert!(short.err().unwrap().contains("2 items need 3 offsets"));
        let odd = frame(&ids[..7], 4, &[0, 1], &[1], &[1], &[], &[], 4);
        assert!(odd.err().unwrap().contains("middle of a value"));
        let wide = frame(&ids, 3, &[0, 1], &[1], &[1], &[], &[], 4);
        assert!(wide.err().unwrap().contains("2 or 4 bytes"));
    }
}
