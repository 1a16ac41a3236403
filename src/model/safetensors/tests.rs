//! Tests of the SafeTensors reader and writer: a round trip through a file
//! and one test per error. It owns test fixtures only.

use super::*;

fn raw_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}

fn parse_error(header: &str, data: &[u8]) -> SafeTensorsError {
    match SafeTensors::parse(raw_file(header, data)) {
        Ok(_) => panic!("header {header} should be rejected"),
        Err(error) => error,
    }
}

fn unique_temp_path(test: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    std::env::temp_dir().join(format!(
        "numerics_scratch_{test}_{}_{nanos}.safetensors",
        std::process::id()
    ))
}

#[test]
fn round_trip_through_a_file() {
    let matrix = [1.0f32, -2.5, 3.25, 1e-3, 7.0, -0.0];
    let halves = [0.1f32, 65504.0, 1e9, -3.0];
    let codes = vec![0x40u8, 0x7F, 0x80];
    let mut writer = SafeTensorsWriter::new();
    writer.add_f32("layers.0.weight", &[2, 3], &matrix).unwrap();
    writer.add_f16("layers.0.bias", &[4], &halves).unwrap();
    writer
        .add_bytes("layers.0.scaled", Dtype::F8E4M3, &[3], codes.clone())
        .unwrap();
    writer
        .add_bytes("a.bfloat", Dtype::BF16, &[2], vec![0x80, 0x3F, 0xC0, 0xBF])
        .unwrap();
    writer.add_f32("empty", &[0, 4], &[]).unwrap();
    writer.add_metadata("format", "pt");

    let path = unique_temp_path("round_trip");
    writer.write(&path).unwrap();
    let file = SafeTensors::read(&path);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let file = file.unwrap();

    let names: Vec<&str> = file.names().collect();
    assert_eq!(
        names,
        [
            "a.bfloat",
            "empty",
            "layers.0.bias",
            "layers.0.scaled",
            "layers.0.weight"
        ]
    );
    assert_eq!(file.shape("layers.0.weight"), Some(&[2, 3][..]));
    assert_eq!(file.shape("nope"), None);
    assert_eq!(file.dtype("layers.0.scaled"), Some(Dtype::F8E4M3));
    assert_eq!(file.tensor_f32("layers.0.weight", &[2, 3]).unwrap(), matrix);
    assert_eq!(
        file.tensor_f32("layers.0.bias", &[4]).unwrap(),
        [f32::from_bits(0x3DCC_C000), 65504.0, 65504.0, -3.0]
    );
    assert_eq!(file.tensor_f32("a.bfloat", &[2]).unwrap(), [1.0, -1.5]);
    assert_eq!(
        file.tensor_f32("empty", &[0, 4]).unwrap(),
        Vec::<f32>::new()
    );
    assert_eq!(file.tensor_bytes("layers.0.scaled").unwrap(), codes);
    assert_eq!(
        file.metadata().get("format").map(String::as_str),
        Some("pt")
    );

    // Layout: data section 8-byte aligned, keys sorted, tensors contiguous.
    let header_length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!((8 + header_length) % 8, 0);
    let header_text = std::str::from_utf8(&bytes[8..8 + header_length]).unwrap();
    let positions: Vec<usize> = [
        "__metadata__",
        "a.bfloat",
        "empty",
        "layers.0.bias",
        "layers.0.scaled",
    ]
    .iter()
    .map(|key| header_text.find(&format!("\"{key}\"")).unwrap())
    .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "{header_text}"
    );
    let mut ranges: Vec<(usize, usize)> = file
        .tensors
        .values()
        .map(|entry| (entry.begin, entry.end))
        .collect();
    ranges.sort_unstable();
    assert_eq!(ranges.first().map(|range| range.0), Some(0));
    assert!(ranges.windows(2).all(|pair| pair[0].1 == pair[1].0));
    assert_eq!(
        ranges.last().map(|range| range.1),
        Some(bytes.len() - 8 - header_length)
    );
    assert_eq!(file.tensors["layers.0.weight"].begin % 4, 0);
}

#[test]
fn missing_file_names_the_path() {
    let path = unique_temp_path("missing");
    let error = SafeTensors::read(&path).unwrap_err();
    assert!(matches!(error, SafeTensorsError::Input(_)));
    assert!(error.to_string().contains(&path.display().to_string()));
}

#[test]
fn truncated_file() {
    let error = SafeTensors::parse(vec![1, 2, 3]).unwrap_err();
    assert!(matches!(
        error,
        SafeTensorsError::Truncated { file_length: 3 }
    ));
    assert_eq!(
        error.to_string(),
        "file is truncated: 3 bytes, fewer than the 8-byte header length"
    );
}

#[test]
fn header_length_beyond_file() {
    let mut file = 100u64.to_le_bytes().to_vec();
    file.extend_from_slice(b"{}");
    let error = SafeTensors::parse(file).unwrap_err();
    assert_eq!(
        error.to_string(),
        "header length 100 runs past the end of the 10-byte file"
    );
    let huge = SafeTensors::parse(u64::MAX.to_le_bytes().to_vec()).unwrap_err();
    assert!(matches!(huge, SafeTensorsError::HeaderBeyondFile { .. }));
}

#[test]
fn invalid_json() {
    let error = parse_error("{\"w\": ", &[]);
    assert!(matches!(error, SafeTensorsError::InvalidJson { .. }));
    assert!(error.to_string().starts_with("header is not valid JSON: "));
    assert!(matches!(
        parse_error("[1, 2]", &[]),
        SafeTensorsError::HeaderNotObject { .. }
    ));
}

#[test]
fn malformed_entry_and_metadata() {
    let error = parse_error(r#"{"w": {"dtype": "F32", "shape": [2]}}"#, &[0; 8]);
    assert!(matches!(&error, SafeTensorsError::InvalidEntry { name, .. } if name == "w"));
    assert!(
        error
            .to_string()
            .starts_with("tensor `w`: invalid header entry: "),
        "{error}"
    );
    let error = parse_error(r#"{"__metadata__": {"a": 1}}"#, &[]);
    assert!(matches!(error, SafeTensorsError::InvalidMetadata { .. }));
}

#[test]
fn unknown_dtype() {
    let error = parse_error(
        r#"{"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}"#,
        &[0; 8],
    );
    assert_eq!(error.to_string(), "tensor `w`: unknown dtype `Q4`");
}

#[test]
fn missing_tensor() {
    let mut writer = SafeTensorsWriter::new();
    writer.add_f32("present", &[1], &[1.0]).unwrap();
    let file = SafeTensors::parse(writer.to_bytes()).unwrap();
    let error = file.tensor_f32("absent", &[1]).unwrap_err();
    assert_eq!(error.to_string(), "tensor `absent` is not in the file");
    assert!(file.tensor_bytes("absent").is_err());
}

#[test]
fn shape_mismatch() {
    let name = "layers.3.mlp.up.weight";
    let mut writer = SafeTensorsWriter::new();
    writer
        .add_bytes(name, Dtype::F8E4M3, &[4304, 1152], vec![0; 4304 * 1152])
        .unwrap();
    let file = SafeTensors::parse(writer.to_bytes()).unwrap();
    let error = file.tensor_f32(name, &[1152, 4304]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tensor `layers.3.mlp.up.weight`: expected shape [1152, 4304], file has [4304, 1152]"
    );
}

#[test]
fn unsupported_dtype() {
    let mut writer = SafeTensorsWriter::new();
    writer
        .add_bytes("w8", Dtype::F8E4M3, &[2], vec![0x40, 0x41])
        .unwrap();
    writer
        .add_bytes("ints", Dtype::I32, &[1], vec![0; 4])
        .unwrap();
    let file = SafeTensors::parse(writer.to_bytes()).unwrap();
    let error = file.tensor_f32("w8", &[2]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tensor `w8`: dtype F8_E4M3 cannot be converted to f32 (supported: F32, F16, BF16)"
    );
    assert!(matches!(
        file.tensor_f32("ints", &[1]),
        Err(SafeTensorsError::UnsupportedDtype {
            dtype: Dtype::I32,
            ..
        })
    ));
}

#[test]
fn offsets_out_of_bounds() {
    let error = parse_error(
        r#"{"w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}"#,
        &[0; 8],
    );
    assert_eq!(
        error.to_string(),
        "tensor `w`: data offsets [4, 12] run past the 8-byte data section"
    );
    let error = parse_error(
        r#"{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}}"#,
        &[0; 8],
    );
    assert!(matches!(error, SafeTensorsError::OffsetsOutOfBounds { .. }));
}

#[test]
fn offsets_reversed() {
    let error = parse_error(
        r#"{"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}"#,
        &[0; 8],
    );
    assert_eq!(
        error.to_string(),
        "tensor `w`: data offsets [8, 4] are reversed"
    );
}

#[test]
fn offsets_inconsistent_with_shape() {
    let error = parse_error(
        r#"{"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 8]}}"#,
        &[0; 16],
    );
    assert_eq!(
        error.to_string(),
        "tensor `w`: data offsets [0, 8] span 8 bytes, but shape [2, 3] of F16 needs 12"
    );
    let error = parse_error(
        r#"{"w": {"dtype": "F32", "shape": [18446744073709551615, 4], "data_offsets": [0, 8]}}"#,
        &[0; 8],
    );
    assert!(matches!(error, SafeTensorsError::ShapeOverflow { .. }));
}

#[test]
fn overlapping_offsets() {
    let header = r#"{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}"#;
    let error = parse_error(header, &[0; 16]);
    assert_eq!(
        error.to_string(),
        "tensors `a` and `b` have overlapping data offsets"
    );
    // Empty tensors may share an offset; gaps are tolerated.
    let header = r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "e": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}"#;
    assert!(SafeTensors::parse(raw_file(header, &[0; 12])).is_ok());
}

#[test]
fn writer_rejects_bad_tensors() {
    let mut writer = SafeTensorsWriter::new();
    let error = writer.add_f32("w", &[2, 2], &[1.0; 3]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tensor `w`: 12 bytes of data, but shape [2, 2] of F32 needs 16"
    );
    writer.add_f16("w", &[1], &[1.0]).unwrap();
    assert!(matches!(
        writer.add_f32("w", &[1], &[1.0]),
        Err(SafeTensorsError::DuplicateTensor { .. })
    ));
    assert!(matches!(
        writer.add_f32("__metadata__", &[1], &[1.0]),
        Err(SafeTensorsError::ReservedName { .. })
    ));
    let path = std::env::temp_dir()
        .join("numerics_scratch_no_such_directory")
        .join("x.safetensors");
    assert!(matches!(
        writer.write(&path),
        Err(SafeTensorsError::Write { .. })
    ));
}
