//! The protobuf wire format, read and written by hand: varints, length-delimited
//! fields and fixed32/fixed64 values, kept in file order.
//!
//! Why not the `protobuf`/`prost` crates: a SentencePiece `.model` is one small
//! proto2 schema (`ModelProto`) of which we read a dozen fields. A generated
//! binding would pull in a build step (protoc or a build script) and a runtime
//! crate for ~200 lines of decoding, and generated structs drop or reorder
//! fields they do not know. Here a message is its list of fields, in order, so
//! unknown fields survive a round trip byte for byte, and every error can name
//! the byte offset at fault (the generated parsers only say "failed").
//!
//! ```text
//! 0a 03 61 62 63 15 00 00 80 3f  ->  [Field 1 = Bytes("abc"), Field 2 = Fixed32(1.0f32 bits)]
//! ```

use super::SpmError;

/// One field's value as it travels on the wire (the wire type says which).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Wire type 0: int32/int64/uint32/bool/enum.
    Varint(u64),
    /// Wire type 1: double/fixed64.
    Fixed64(u64),
    /// Wire type 2: string/bytes/nested message/packed repeated.
    Bytes(Vec<u8>),
    /// Wire type 5: float/fixed32.
    Fixed32(u32),
}

/// A field: its number in the schema and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub number: u32,
    pub value: Value,
}

/// A message as the list of its fields, in the order they were read or set.
///
/// Getters follow proto2's rule for a singular field that occurs twice: the last
/// occurrence wins. A field whose wire type does not match the schema reads as
/// absent (protobuf keeps it as an unknown field; so do we, in `fields`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    pub fields: Vec<Field>,
}

/// A cursor over a message's bytes; `base` is where those bytes start in the
/// file, so that errors name file offsets even inside nested messages.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, at: usize, reason: String) -> SpmError {
        SpmError::Corrupt {
            offset: self.base + at,
            reason,
        }
    }

    /// Reads a base-128 varint: 7 bits per byte, low group first, the high bit
    /// set on every byte but the last; at most 10 bytes for 64 bits.
    fn varint(&mut self) -> Result<u64, SpmError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.data.get(self.pos) else {
                let reason = "truncated varint (the data ends inside it)".to_string();
                return Err(self.corrupt(start, reason));
            };
            self.pos += 1;
            // The 10th byte holds only bit 63: anything above 1 overflows.
            if i == 9 && byte > 1 {
                return Err(self.corrupt(start, "varint overflows 64 bits".to_string()));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.corrupt(start, "varint longer than 10 bytes".to_string()))
    }

    /// The next `n` bytes of the field at `start`; `what` names it in the error
    /// (made only then: a model is thousands of fields).
    fn take(
        &mut self,
        n: usize,
        what: impl FnOnce() -> String,
        start: usize,
    ) -> Result<&'a [u8], SpmError> {
        let left = self.data.len() - self.pos;
        if n > left {
            let what = what();
            let reason = format!("truncated {what}: needs {n} bytes, {left} remain");
            return Err(self.corrupt(start, reason));
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    /// Reads one field; returns it with the file offset of its payload (for a
    /// nested message, where that message starts).
    fn field(&mut self) -> Result<(Field, usize), SpmError> {
        let start = self.pos;
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(self.corrupt(start, format!("invalid field number {number}")));
        }
        let payload = self.pos;
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8, || format!("fixed64 field {number}"), start)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap()))
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                let data_start = self.pos;
                let b = self.take(len, || format!("length-delimited field {number}"), start)?;
                return Ok((
                    field(number, Value::Bytes(b.to_vec())),
                    self.base + data_start,
                ));
            }
            5 => {
                let b = self.take(4, || format!("fixed32 field {number}"), start)?;
                Value::Fixed32(u32::from_le_bytes(b.try_into().unwrap()))
            }
            3 | 4 => {
                let reason = format!("field {number} uses the deprecated group encoding");
                return Err(self.corrupt(start, reason));
            }
            t => return Err(self.corrupt(start, format!("invalid wire type {t}"))),
        };
        Ok((field(number, value), self.base + payload))
    }
}

fn field(number: u64, value: Value) -> Field {
    Field {
        number: number as u32,
        value,
    }
}

/// Parses `data` (found at file offset `base`) into its fields, each with the
/// file offset of its payload.
pub fn read_fields(data: &[u8], base: usize) -> Result<Vec<(Field, usize)>, SpmError> {
    let mut reader = Reader { data, pos: 0, base };
    let mut fields = Vec::new();
    while reader.pos < data.len() {
        fields.push(reader.field()?);
    }
    Ok(fields)
}

/// Appends `value` as a base-128 varint.
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends one field: its tag (number and wire type), then its value.
pub fn write_field(out: &mut Vec<u8>, f: &Field) {
    let wire_type = match f.value {
        Value::Varint(_) => 0,
        Value::Fixed64(_) => 1,
        Value::Bytes(_) => 2,
        Value::Fixed32(_) => 5,
    };
    write_varint(out, (u64::from(f.number) << 3) | wire_type);
    match &f.value {
        Value::Varint(v) => write_varint(out, *v),
        Value::Fixed64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bytes(b) => {
            write_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Fixed32(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

impl Message {
    /// Parses a message found at file offset `base`.
    pub fn parse(data: &[u8], base: usize) -> Result<Message, SpmError> {
        let fields = read_fields(data, base)?
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        Ok(Message { fields })
    }

    /// Appends the message's fields, in order.
    pub fn write(&self, out: &mut Vec<u8>) {
        for f in &self.fields {
            write_field(out, f);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    /// The last value of field `number`, if any.
    pub fn last(&self, number: u32) -> Option<&Value> {
        self.fields
            .iter()
            .rev()
            .find(|f| f.number == number)
            .map(|f| &f.value)
    }

    pub fn varint(&self, number: u32) -> Option<u64> {
        match self.last(number)? {
            Value::Varint(v) => Some(*v),
            _ => None,
        }
    }

    /// An int32 field: negative values travel as 10-byte sign-extended varints,
    /// so the low 32 bits are the value.
    pub fn int32(&self, number: u32) -> Option<i32> {
        self.varint(number).map(|v| v as i32)
    }

    pub fn boolean(&self, number: u32) -> Option<bool> {
        self.varint(number).map(|v| v != 0)
    }

    pub fn float(&self, number: u32) -> Option<f32> {
        match self.last(number)? {
            Value::Fixed32(v) => Some(f32::from_bits(*v)),
            _ => None,
        }
    }

    pub fn bytes(&self, number: u32) -> Option<&[u8]> {
        match self.last(number)? {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// A string field (invalid UTF-8 reads as absent).
    pub fn string(&self, number: u32) -> Option<&str> {
        std::str::from_utf8(self.bytes(number)?).ok()
    }

    /// Every value of a repeated string field, in order.
    pub fn strings(&self, number: u32) -> Vec<&str> {
        let values = self.fields.iter().filter(|f| f.number == number);
        values
            .filter_map(|f| match &f.value {
                Value::Bytes(b) => std::str::from_utf8(b).ok(),
                _ => None,
            })
            .collect()
    }

    /// Sets a singular field: replaces its first occurrence (dropping later
    /// ones), or inserts it before the first field with a higher number, which
    /// is where protobuf's own writers put it.
    pub fn set(&mut self, number: u32, value: Value) {
        if let Some(i) = self.fields.iter().position(|f| f.number == number) {
            self.fields[i].value = value;
            let mut seen = 0;
            self.fields.retain(|f| {
                seen += usize::from(f.number == number);
                f.number != number || seen == 1
            });
            return;
        }
        let at = self.fields.iter().position(|f| f.number > number);
        let at = at.unwrap_or(self.fields.len());
        self.fields.insert(at, Field { number, value });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_bytes(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(&mut out, v);
        out
    }

    fn read_varint(data: &[u8]) -> Result<u64, SpmError> {
        Reader {
            data,
            pos: 0,
            base: 0,
        }
        .varint()
    }

    #[test]
    fn varints_round_trip_at_every_width_edge() {
        let edges = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as u64,
            1 << 63,
            u64::MAX,
        ];
        for v in edges {
            assert_eq!(read_varint(&varint_bytes(v)), Ok(v), "{v}");
        }
        assert_eq!(varint_bytes(0), [0]);
        assert_eq!(varint_bytes(300), [0xac, 0x02]);
        assert_eq!(varint_bytes(u64::MAX).len(), 10);
    }

    #[test]
    fn negative_int32_is_read_from_a_ten_byte_varint() {
        let m = Message::parse(&[&[0x08][..], &varint_bytes(-1i64 as u64)].concat(), 0);
        assert_eq!(m.unwrap().int32(1), Some(-1));
    }

    #[test]
    fn a_varint_past_64_bits_is_an_error_at_its_start() {
        let mut data = vec![0xff; 9];
        data.push(0x02);
        let err = read_varint(&data).unwrap_err();
        assert!(matches!(err, SpmError::Corrupt { offset: 0, .. }), "{err}");
        let err = read_varint(&[0xff; 11]).unwrap_err();
        assert!(matches!(err, SpmError::Corrupt { offset: 0, .. }), "{err}");
    }

    #[test]
    fn a_truncated_varint_names_where_it_starts() {
        // Field 1 (varint) = 5, then field 2's tag and an unfinished varint at byte 3.
        let err = Message::parse(&[0x08, 0x05, 0x10, 0x80], 100).unwrap_err();
        assert_eq!(
            err,
            SpmError::Corrupt {
                offset: 103,
                reason: "truncated varint (the data ends inside it)".into()
            }
        );
    }

    #[test]
    fn a_length_past_the_end_names_the_field_and_its_offset() {
        // Field 1, length-delimited, claims 5 bytes; 2 follow.
        let err = Message::parse(&[0x0a, 0x05, b'a', b'b'], 0).unwrap_err();
        let SpmError::Corrupt { offset, reason } = err else {
            panic!("not a Corrupt error")
        };
        assert_eq!(offset, 0);
        assert!(
            reason.contains("field 1") && reason.contains("5 bytes, 2 remain"),
            "{reason}"
        );
    }

    #[test]
    fn fields_of_every_wire_type_round_trip_in_order() {
        let mut m = Message::default();
        m.fields.push(Field {
            number: 3,
            value: Value::Varint(2),
        });
        m.fields.push(Field {
            number: 1,
            value: Value::Bytes(b"abc".to_vec()),
        });
        m.fields.push(Field {
            number: 2,
            value: Value::Fixed32(1.5f32.to_bits()),
        });
        m.fields.push(Field {
            number: 900,
            value: Value::Fixed64(7),
        });
        let bytes = m.to_bytes();
        assert_eq!(Message::parse(&bytes, 0).unwrap(), m);
        assert_eq!(m.string(1), Some("abc"));
        assert_eq!(m.float(2), Some(1.5));
        assert_eq!(m.varint(3), Some(2));
    }

    #[test]
    fn the_last_occurrence_of_a_singular_field_wins() {
        let m = Message::parse(&[0x08, 0x01, 0x08, 0x02], 0).unwrap();
        assert_eq!(m.varint(1), Some(2));
    }

    #[test]
    fn set_inserts_in_number_order_and_replaces_duplicates() {
        let mut m = Message::parse(&[0x08, 0x01, 0x18, 0x03, 0x18, 0x04], 0).unwrap();
        m.set(2, Value::Varint(2));
        m.set(3, Value::Varint(9));
        let numbers: Vec<u32> = m.fields.iter().map(|f| f.number).collect();
        assert_eq!(numbers, [1, 2, 3]);
        assert_eq!(m.varint(3), Some(9));
    }

    #[test]
    fn groups_and_bad_wire_types_are_errors() {
        assert!(Message::parse(&[0x0b], 0).is_err()); // field 1, start group
        assert!(Message::parse(&[0x0e], 0).is_err()); // field 1, wire type 6
        assert!(Message::parse(&[0x00], 0).is_err()); // field 0
    }
}
