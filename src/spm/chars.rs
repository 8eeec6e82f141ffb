//! What the encoder asks about a character at nearly every character of new
//! text: its mergeable id, and where it stands inside the vocabulary's pieces
//! (which tells where text can be cut into words and parts, see
//! [`super::encode`]).
//!
//! A two-level table over code points, in blocks of 256: a block's slot in a
//! small index (17 KB for all of Unicode), then its entry. Blocks without any
//! character of a piece share one empty block. Two loads and no hashing, where a
//! hash map of characters cost a hash, a probe and a compare at every character.

use rustc_hash::FxHashMap;

/// Some mergeable piece has a character right after this one.
pub const FOLLOWED: u8 = 1;
/// Some mergeable piece has a character right before this one.
pub const PRECEDED: u8 = 2;
/// Some mergeable piece has the whitespace mark right after this character.
pub const BEFORE_SPACE: u8 = 4;
/// Some mergeable piece has the whitespace mark right before this character.
pub const AFTER_SPACE: u8 = 8;

/// No mergeable piece is this one character.
pub const NO_ID: u32 = u32::MAX;

/// One character's facts: its mergeable id ([`NO_ID`] for none) and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CharInfo {
    pub id: u32,
    pub flags: u8,
}

const NOTHING: CharInfo = CharInfo {
    id: NO_ID,
    flags: 0,
};

const BLOCK_BITS: u32 = 8;
const BLOCK: usize = 1 << BLOCK_BITS;
const BLOCKS: usize = (char::MAX as usize >> BLOCK_BITS) + 1;

/// [`CharInfo`] for every character (see the module header).
#[derive(Debug)]
pub struct CharTable {
    /// For each block of code points, which block of `infos` holds it (0: the
    /// shared empty block).
    blocks: Vec<u16>,
    infos: Vec<CharInfo>,
    /// No piece has the whitespace mark right after a character other than the mark
    /// (Llama 2's and Mistral's: only runs of `▁` hold it inside a piece).
    pub mark_after_marks_only: bool,
}

impl CharTable {
    /// The table of the mergeable pieces (piece -> id), whose whitespace mark is `space`.
    pub fn new(mergeable: &FxHashMap<String, u32>, space: char) -> CharTable {
        let mut table = CharTable {
            blocks: vec![0; BLOCKS],
            infos: vec![NOTHING; BLOCK],
            mark_after_marks_only: true,
        };
        let mut table_marks_ok = true;
        for (piece, &id) in mergeable {
            let mut chars = piece.chars().peekable();
            let mut prev = None;
            while let Some(c) = chars.next() {
                let next = chars.peek().copied();
                let info = table.entry(c);
                if prev.is_none() && next.is_none() {
                    info.id = id;
                }
                if let Some(n) = next {
                    info.flags |= FOLLOWED | if n == space { BEFORE_SPACE } else { 0 };
                    table_marks_ok &= n != space || c == space;
                }
                if let Some(p) = prev {
                    info.flags |= PRECEDED | if p == space { AFTER_SPACE } else { 0 };
                }
                prev = Some(c);
            }
        }
        table.mark_after_marks_only = table_marks_ok;
        table
    }

    fn entry(&mut self, c: char) -> &mut CharInfo {
        let at = c as usize >> BLOCK_BITS;
        if self.blocks[at] == 0 {
            self.blocks[at] = (self.infos.len() / BLOCK) as u16;
            self.infos.extend([NOTHING; BLOCK]);
        }
        &mut self.infos[self.blocks[at] as usize * BLOCK + (c as usize & (BLOCK - 1))]
    }

    #[inline]
    pub fn get(&self, c: char) -> CharInfo {
        let block = self.blocks[c as usize >> BLOCK_BITS] as usize;
        self.infos[block * BLOCK + (c as usize & (BLOCK - 1))]
    }

    /// Whether `flag` is set for `c`.
    #[inline]
    pub fn has(&self, c: char, flag: u8) -> bool {
        self.get(c).flags & flag != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_gets_its_id_and_where_it_stands_in_pieces() {
        let space = '\u{2581}';
        let pieces = ["a", "é", "😀", "\u{10FFFF}", "ab", "a▁", "▁é", "ñ😀", "▁"];
        let mergeable: FxHashMap<String, u32> = (pieces.iter().enumerate())
            .map(|(i, p)| (p.to_string(), i as u32))
            .collect();
        let t = CharTable::new(&mergeable, space);
        let info = |c: char| t.get(c);
        assert_eq!(info('a').id, 0);
        assert_eq!(info('a').flags, FOLLOWED | BEFORE_SPACE);
        assert_eq!(
            info('b'),
            CharInfo {
                id: NO_ID,
                flags: PRECEDED
            }
        );
        assert_eq!(
            info('é'),
            CharInfo {
                id: 1,
                flags: PRECEDED | AFTER_SPACE
            }
        );
        assert_eq!(
            info('😀'),
            CharInfo {
                id: 2,
                flags: PRECEDED
            }
        );
        assert_eq!(info('\u{10FFFF}'), CharInfo { id: 3, flags: 0 });
        assert_eq!(
            info('ñ'),
            CharInfo {
                id: NO_ID,
                flags: FOLLOWED
            }
        );
        assert_eq!(
            info(space),
            CharInfo {
                id: 8,
                flags: FOLLOWED | PRECEDED
            }
        );
        // Characters of no piece, in an empty block and next to a used one.
        for c in ['z', '\0', 'ê', '\u{1F601}', '\u{10FFFE}', '中'] {
            assert_eq!(info(c), NOTHING, "{c:?}");
        }
        assert!(t.has('a', BEFORE_SPACE) && !t.has('a', AFTER_SPACE));
        // The mark next to itself: both flags or neither (the word cutter
        // relies on it between two marks).
        let with_run: FxHashMap<String, u32> = [("x▁▁y".to_string(), 0)].into_iter().collect();
        let t = CharTable::new(&with_run, space);
        assert!(t.has(space, BEFORE_SPACE) && t.has(space, AFTER_SPACE));
    }
}
