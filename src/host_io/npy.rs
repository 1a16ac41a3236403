//! NumPy `.npy` arrays through the `npyz` crate: any float array (F16, F32,
//! F64, little- or big-endian, C order) read as F32 values with its shape,
//! and F32 arrays written whole (a temporary file renamed over the target).
//!
//! Reading is bounded by the header (`input_file`): the magic, version and
//! header length are read first (a header over [`MAX_HEADER_BYTES`] is
//! refused), then the header; its shape and element type say how many data
//! bytes follow, which must be exactly what the file holds (at most
//! [`MAX_ELEMENTS`] elements), checked before they are read.

use std::path::Path;

use npyz::WriterBuilder;

use super::HostIoError;
use crate::input_file::InputFile;

/// A dense row-major array of F32 values.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<u64>,
    pub values: Vec<f32>,
}

/// The most elements an input or reference array may hold (a 64 MiB array
/// of F32: far above any model's pixels, patches or embedding).
pub const MAX_ELEMENTS: u64 = 16 << 20;

/// The most bytes a `.npy` header may have (numpy writes some 128; its own
/// reader refuses more than 10 000 without `allow_pickle`-style opt-ins).
pub const MAX_HEADER_BYTES: u64 = 64 << 10;

/// The magic, version and header length of an `.npy` file, then its header:
/// the prefix of the file up to its data, read without reading the data.
fn read_prefix(file: &mut InputFile) -> Result<Vec<u8>, HostIoError> {
    let path = file.path().to_path_buf();
    let not_npy =
        |message: String| HostIoError::file(&path, format!("not a NumPy .npy file: {message}"));
    let mut prefix = file.read_prefix(8)?;
    if prefix.len() < 8 || &prefix[..6] != b"\x93NUMPY" {
        return Err(not_npy(String::from("it does not start with \\x93NUMPY")));
    }
    let (field, header_bytes) = match prefix[6] {
        1 => {
            let field = file.read_prefix(2)?;
            let length = field
                .first_chunk::<2>()
                .map(|bytes| u64::from(u16::from_le_bytes(*bytes)));
            (field, length)
        }
        2 | 3 => {
            let field = file.read_prefix(4)?;
            let length = field
                .first_chunk::<4>()
                .map(|bytes| u64::from(u32::from_le_bytes(*bytes)));
            (field, length)
        }
        version => {
            return Err(not_npy(format!(
                "format version {version} is not 1, 2 or 3"
            )));
        }
    };
    let Some(header_bytes) = header_bytes else {
        return Err(not_npy(String::from("the file ends inside its header")));
    };
    if header_bytes > MAX_HEADER_BYTES {
        return Err(not_npy(format!(
            "its header declares {header_bytes} bytes, more than any array's ({MAX_HEADER_BYTES} at most)"
        )));
    }
    prefix.extend(field);
    let header = file.read_prefix(header_bytes)?;
    if (header.len() as u64) < header_bytes {
        return Err(not_npy(String::from("the file ends inside its header")));
    }
    prefix.extend(header);
    Ok(prefix)
}

/// Reads a float array, refusing other element types, Fortran order,
/// non-finite values and arrays larger than any input.
pub fn read(path: &Path) -> Result<Array, HostIoError> {
    let mut input = InputFile::open(path)?;
    let prefix = read_prefix(&mut input)?;
    let header = npyz::NpyFile::new(&prefix[..])
        .map_err(|error| HostIoError::file(path, format!("not a NumPy .npy file: {error}")))?;
    check_declared(&header, path)?;
    let item_bytes = match header.dtype() {
        npyz::DType::Plain(type_string) => type_string.size_field(),
        _ => 0,
    };
    let elements: u64 = header.shape().iter().product();
    let data = input.read_exactly(elements * item_bytes, "the array the header declares")?;
    let mut bytes = prefix;
    bytes.extend(data);
    let file = npyz::NpyFile::new(&bytes[..])
        .map_err(|error| HostIoError::file(path, format!("not a NumPy .npy file: {error}")))?;
    let shape = file.shape().to_vec();
    Ok(Array {
        shape,
        values: values_of(file, path)?,
    })
}

/// What the header declares, checked before the data is read: C order, at
/// most [`MAX_ELEMENTS`] elements, of a float type.
fn check_declared(file: &npyz::NpyFile<&[u8]>, path: &Path) -> Result<(), HostIoError> {
    if file.order() == npyz::Order::Fortran {
        return Err(HostIoError::file(
            path,
            "the array is in Fortran (column-major) order; save it with np.ascontiguousarray",
        ));
    }
    let shape = file.shape().to_vec();
    let elements = shape
        .iter()
        .try_fold(1u64, |product, &extent| product.checked_mul(extent));
    match elements {
        Some(elements) if elements <= MAX_ELEMENTS => {}
        _ => {
            return Err(HostIoError::file(
                path,
                format!("shape {shape:?} holds more than {MAX_ELEMENTS} elements"),
            ));
        }
    }
    match file.dtype() {
        npyz::DType::Plain(type_string)
            if type_string.type_char() == npyz::TypeChar::Float
                && matches!(type_string.size_field(), 2 | 4 | 8) =>
        {
            Ok(())
        }
        npyz::DType::Plain(type_string) => Err(HostIoError::file(
            path,
            format!("elements of type {type_string} are not floats; save the array as float32"),
        )),
        other => Err(HostIoError::file(
            path,
            format!(
                "elements of type {} are not floats; save the array as float32",
                other.descr()
            ),
        )),
    }
}

/// The values of a checked array as F32, every one finite.
fn values_of(file: npyz::NpyFile<&[u8]>, path: &Path) -> Result<Vec<f32>, HostIoError> {
    let type_string = match file.dtype() {
        npyz::DType::Plain(type_string) => type_string,
        other => {
            return Err(HostIoError::file(
                path,
                format!(
                    "elements of type {} are not floats; save the array as float32",
                    other.descr()
                ),
            ));
        }
    };
    let unreadable = |error: &dyn std::fmt::Display| {
        HostIoError::file(path, format!("cannot read the values: {error}"))
    };
    let values: Vec<f32> = match (type_string.type_char(), type_string.size_field()) {
        (npyz::TypeChar::Float, 2) => file
            .data::<half::f16>()
            .map_err(|error| unreadable(&error))?
            .map(|value| value.map(f32::from))
            .collect::<Result<_, _>>()
            .map_err(|error| unreadable(&error))?,
        (npyz::TypeChar::Float, 4) => file.into_vec::<f32>().map_err(|error| unreadable(&error))?,
        (npyz::TypeChar::Float, 8) => file
            .data::<f64>()
            .map_err(|error| unreadable(&error))?
            .map(|value| value.map(|value| value as f32))
            .collect::<Result<_, _>>()
            .map_err(|error| unreadable(&error))?,
        _ => {
            return Err(HostIoError::file(
                path,
                format!("elements of type {type_string} are not floats; save the array as float32"),
            ));
        }
    };
    if let Some(index) = values.iter().position(|value| !value.is_finite()) {
        return Err(HostIoError::file(
            path,
            format!(
                "element {index} is {} (every value must be finite)",
                values[index]
            ),
        ));
    }
    Ok(values)
}

/// The bytes of a little-endian F32 `.npy` file of `shape`.
pub fn encode(shape: &[u64], values: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut bytes)
        .begin_nd()
        .expect("writing into memory cannot fail");
    writer
        .extend(values.iter().copied())
        .expect("writing into memory cannot fail");
    writer.finish().expect("writing into memory cannot fail");
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_arrays_read_back() {
        let directory = std::env::temp_dir().join(format!("superstep-npy-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("array.npy");
        std::fs::write(&path, encode(&[2, 3], &[1.0, -2.5, 3.0, 0.0, 4.25, -1.0])).unwrap();
        let array = read(&path).unwrap();
        assert_eq!(array.shape, vec![2, 3]);
        assert_eq!(array.values, vec![1.0, -2.5, 3.0, 0.0, 4.25, -1.0]);
        std::fs::write(&path, b"not an array").unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("not a NumPy .npy file"), "{error}");
        std::fs::write(&path, encode(&[2], &[1.0, f32::NAN])).unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("element 1 is NaN"), "{error}");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
